package fault

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Container faults act on the container's cgroup v2 directory (every process of the container,
// whatever it forked).

// cgroup returns the running container's cgroup directory: ErrUnknownContainer for a name the
// pod never ran, ErrNotRunning for one without a process now (its cgroup goes with its process).
func (p *Pod) cgroup(container string) (string, error) {
	return p.node.rt.containerCgroup(p, container)
}

func procs(dir string) []string {
	return strings.Fields(readTrimmed(filepath.Join(dir, "cgroup.procs")))
}

// Kill SIGKILLs every process of the container at once (cgroup.kill) and returns when they are
// gone: a crash, or the kernel's OOM killer. The kubelet then restarts the container per the
// pod's restartPolicy. ErrNotRunning when it has no process.
func (p *Pod) Kill(container string) error {
	dir, err := p.cgroup(container)
	if err != nil {
		return err
	}
	victims := procs(dir)
	if len(victims) == 0 {
		return fmt.Errorf("%s: container %q: %w", p, container, ErrNotRunning)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
		return fmt.Errorf("%s: kill container %q: %w", p, container, err)
	}
	// Wait for these processes, not for an empty cgroup: the kubelet may restart the container the
	// moment they are gone, and a poll could miss the empty cgroup in between.
	return p.node.waitUntil(fmt.Sprintf("the processes %v of container %q of %s to exit", victims, container, p),
		func() bool {
			left := map[string]bool{}
			for _, pid := range procs(dir) {
				left[pid] = true
			}
			for _, pid := range victims {
				if left[pid] {
					return false
				}
			}
			return true
		})
}

// Freeze stops every process of the container where it is (cgroup.freeze), without a signal, as a
// long garbage-collection pause, a stalled disk or a VM that stops being scheduled would; it
// returns once the kernel reports the cgroup frozen. A frozen process holds its sockets but
// answers nothing; SIGKILL still ends it. Freezing a frozen container is harmless.
func (p *Pod) Freeze(container string) error { return p.setFrozen(container, true) }

// Thaw lets a frozen container run again; it returns once the kernel reports it thawed. Thawing
// a container that is not frozen is harmless.
func (p *Pod) Thaw(container string) error { return p.setFrozen(container, false) }

// Frozen says whether the container's cgroup is frozen.
func (p *Pod) Frozen(container string) (bool, error) {
	dir, err := p.cgroup(container)
	if err != nil {
		return false, err
	}
	return cgroupFrozen(dir), nil
}

func cgroupFrozen(dir string) bool {
	raw, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "frozen 1" {
			return true
		}
	}
	return false
}

func (p *Pod) setFrozen(container string, frozen bool) error {
	dir, err := p.cgroup(container)
	if err != nil {
		return err
	}
	value, verb := "0", "thawed"
	if frozen {
		value, verb = "1", "frozen"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(value), 0o644); err != nil {
		return fmt.Errorf("%s: container %q: cgroup.freeze (needs the cgroup v2 freezer, Linux 5.2+): %w", p, container, err)
	}
	return p.node.waitUntil(fmt.Sprintf("container %q of %s to be %s", container, p, verb),
		func() bool { return cgroupFrozen(dir) == frozen })
}

// Crash SIGKILLs every process of every container of the pod at once (cgroup.kill of each; the
// sandbox is left alone, so the pod keeps its network namespace and IP): a crash of the whole
// pod, without preStop or SIGTERM. It does not wait for the exits; it returns how many
// containers had processes. The kubelet restarts them per the pod's restartPolicy.
func (p *Pod) Crash() (int, error) {
	dir, err := PodCgroup(p.UID)
	if err != nil {
		return 0, err
	}
	kills, err := filepath.Glob(filepath.Join(dir, "*", "cgroup.kill"))
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, kill := range kills {
		if filepath.Base(filepath.Dir(kill)) == p.sandbox || len(procs(filepath.Dir(kill))) == 0 {
			continue
		}
		if err := os.WriteFile(kill, []byte("1"), 0o644); err != nil {
			return killed, fmt.Errorf("%s: %w", kill, err)
		}
		killed++
	}
	return killed, nil
}

// PID is the host pid of the first process of the container's running instance.
func (p *Pod) PID(container string) (int, error) { return p.node.rt.containerPID(p, container) }
