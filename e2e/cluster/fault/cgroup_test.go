package fault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

// cgroupRuntime is a node whose one pod has one container, "app", in a throwaway cgroup.
type cgroupRuntime struct {
	runtime // nil: the test calls nothing else
	dir     string
}

func (r cgroupRuntime) containerCgroup(p *Pod, container string) (string, error) {
	if container != "app" {
		return "", ErrUnknownContainer
	}
	return r.dir, nil
}

// sandboxPod makes a throwaway cgroup with one sleeping process in it, as the cgroup of a pod's
// container "app"; everything goes when the test ends.
func sandboxPod(t *testing.T) (*Pod, *exec.Cmd) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root (cgroups)")
	}
	mount, err := nodestate.Cgroup2Mount()
	if err != nil {
		t.Skip(err)
	}
	dir := filepath.Join(mount, fmt.Sprintf("kshard-fault-test-%d", os.Getpid()))
	n := &Node{Timeout: 10 * time.Second, rt: cgroupRuntime{dir: dir}}
	p := &Pod{node: n, Namespace: "ns", Name: "pod", UID: "uid"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644)
		_ = cmd.Process.Kill()
		<-exited
		if err := removeCgroup(dir); err != nil {
			t.Errorf("removing test cgroup %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, cmd
}

// removeCgroup removes an empty cgroup, waiting for a killed process to leave it.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func processState(pid int) string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// pid (comm) state ...: comm has no ')' here (sleep).
	for i := len(raw) - 1; i > 0; i-- {
		if raw[i] == ')' && i+2 < len(raw) {
			return string(raw[i+2])
		}
	}
	return ""
}

func TestFreezeThawAndKillOfAFrozenContainer(t *testing.T) {
	p, cmd := sandboxPod(t)
	if err := p.Freeze("app"); err != nil {
		t.Fatal(err)
	}
	if frozen, err := p.Frozen("app"); err != nil || !frozen {
		t.Fatalf("Frozen after Freeze = %v, %v", frozen, err)
	}
	if err := p.Thaw("app"); err != nil {
		t.Fatal(err)
	}
	if err := p.Thaw("app"); err != nil { // thawing a thawed container is harmless
		t.Fatal(err)
	}
	if frozen, _ := p.Frozen("app"); frozen {
		t.Fatal("still frozen after Thaw")
	}
	if err := p.Freeze("app"); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill("app"); err != nil {
		t.Fatalf("Kill of a frozen container: %v", err)
	}
	if st := processState(cmd.Process.Pid); st != "Z" && st != "" {
		t.Errorf("the killed process is in state %q, want gone (a zombie until reaped)", st)
	}
	if err := p.Kill("app"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Kill of an empty container: %v, want ErrNotRunning", err)
	}
	if err := p.Freeze("db"); !errors.Is(err, ErrUnknownContainer) {
		t.Errorf("Freeze of an unknown container: %v, want ErrUnknownContainer", err)
	}
}
