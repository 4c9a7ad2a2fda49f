package agent

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Cgroups holds every container's processes in a cgroup v2 directory
// <cgroup2 mount>/kshard/pod-<uid>/<container>, so that a container (all of its descendants) can be
// killed at once with cgroup.kill, and nothing escapes cleanup even after the agent crashed.
type Cgroups struct{ Root string }

// FindCgroupRoot returns <cgroup2 mount>/kshard.
func FindCgroupRoot() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: ... mountpoint ... - fstype source options
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return filepath.Join(fields[4], "kshard"), nil
			}
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted (the node agent needs one to track container processes)")
}

func (c *Cgroups) podDir(uid string) string { return filepath.Join(c.Root, "pod-"+uid) }

// ContainerDir creates and returns the container's cgroup.
func (c *Cgroups) ContainerDir(uid, container string) (string, error) {
	dir := filepath.Join(c.podDir(uid), container)
	return dir, os.MkdirAll(dir, 0o755)
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
