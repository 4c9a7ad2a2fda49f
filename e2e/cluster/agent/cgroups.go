package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

// Cgroups holds every container's processes in a cgroup v2 directory
// <cgroup2 mount>/kshard/pod-<uid>/<container>, so that a container (all of its descendants) can be
// killed at once with cgroup.kill, and nothing escapes cleanup even after the agent crashed.
type Cgroups struct{ Root string }

// FindCgroupRoot returns <cgroup2 mount>/kshard.
func FindCgroupRoot() (string, error) {
	mount, err := nodestate.Cgroup2Mount()
	if err != nil {
		return "", err
	}
	return filepath.Join(mount, nodestate.CgroupRootName), nil
}

func (c *Cgroups) podDir(uid string) string { return nodestate.PodCgroup(c.Root, uid) }

// ContainerDir creates and returns the container's cgroup.
func (c *Cgroups) ContainerDir(uid, container string) (string, error) {
	dir := nodestate.ContainerCgroup(c.Root, uid, container)
	return dir, os.MkdirAll(dir, 0o755)
}

// Thaw undoes a freeze of the cgroup (the fault tool's); a cgroup that was never frozen, or a
// kernel without the cgroup v2 freezer, has nothing to undo.
func Thaw(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("0"), 0o644)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Kill SIGKILLs every process in dir and waits (up to 10 s) until the cgroup is empty.
func Kill(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(raw)) == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of %s still alive 10 s after cgroup.kill: %s", dir, strings.Fields(string(raw)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RemoveTree kills and removes every cgroup under dir, children first.
func RemoveTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, RemoveTree(filepath.Join(dir, e.Name())))
		}
	}
	errs = append(errs, Kill(dir))
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemovePod kills and removes the pod's cgroups.
func (c *Cgroups) RemovePod(uid string) error { return RemoveTree(c.podDir(uid)) }
