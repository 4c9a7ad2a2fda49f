package fault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Orphans model a node cut off from the API server while its pod is deleted (force-deleted, as an
// operator or the node lifecycle controller does for an unreachable node): the API server forgets
// the pod, its controller creates a replacement, and the old pod's processes keep running and
// serving on the cut-off node until it reconnects.
//
// They come about here as real ones do: the node's kubelet stops hearing from the API server. While any pod is orphaned the fault tool holds the kubelet stopped (SIGSTOP), so it
// sees neither the pod's deletion nor anything else, and reports nothing; containerd and runc
// keep the pod's containers running. This cuts the whole node off, not one pod: the node's other
// pods run on, but are neither probed nor restarted until the release. The cluster's
// node-monitor grace period (e2e/cluster/up.sh) is longer than the longest hold, so the node is
// not marked NotReady meanwhile, as a single node standing for one of many.
//
// Release of the last orphan resumes the kubelet, which then finds the pod deleted and ends it
// as it ends any deleted pod: preStop hooks, SIGTERM, SIGKILL after the grace period. While other
// orphans remain, the kubelet stays stopped and the released pod's containers are killed at once
// (cgroup.kill). Release returns when none of the pod's containers runs.

// releaseTimeout bounds a release: the kubelet's graceful end of the pod, preStop hooks and a
// grace period included.
const releaseTimeout = 3 * time.Minute

// Orphaned says whether the pod is held as an orphan.
func (p *Pod) Orphaned() bool { return p.node.rt.orphaned(p) }

// Orphan cuts the pod's node off from the API server: the kubelet ignores the pod's deletion
// (graceful or forced) and keeps its processes, network namespace and IP until Release.
// Orphaning an orphan is harmless.
func (p *Pod) Orphan() error { return p.node.rt.orphan(p) }

// Release reconnects the orphan: if its pod is gone from the API server, the kubelet ends its
// processes and Release returns once they are gone. Releasing a pod that is not orphaned is
// harmless.
func (p *Pod) Release() error { return p.node.rt.release(p) }

func (c *cri) orphanMarker(p *Pod) string { return filepath.Join(c.dir, "state", "orphans", p.UID) }

func (c *cri) orphaned(p *Pod) bool {
	_, err := os.Stat(c.orphanMarker(p))
	return err == nil
}

func (c *cri) orphan(p *Pod) error {
	marker := c.orphanMarker(p)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(p.Namespace+"/"+p.Name+"\n"), 0o644); err != nil {
		return err
	}
	if err := c.signalKubelet(syscall.SIGSTOP); err != nil {
		_ = os.Remove(marker)
		return fmt.Errorf("orphan %s: %w", p, err)
	}
	return nil
}

func (c *cri) release(p *Pod) error {
	if !c.orphaned(p) {
		return nil
	}
	if err := os.Remove(c.orphanMarker(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if others, _ := filepath.Glob(filepath.Join(c.dir, "state", "orphans", "*")); len(others) > 0 {
		if err := c.killPod(p); err != nil {
			return err
		}
	} else if err := c.signalKubelet(syscall.SIGCONT); err != nil {
		return fmt.Errorf("release %s: %w", p, err)
	}
	deadline := time.Now().Add(releaseTimeout)
	for {
		running, err := c.running(p)
		if err == nil && len(running) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("release %s: its containers %v still run %s after the kubelet resumed (err %v)",
				p, running, releaseTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running lists the pod's running containers.
func (c *cri) running(p *Pod) ([]string, error) {
	var list criContainers
	if err := c.run(&list, "ps", "--pod", p.sandbox, "--state", "running", "-o", "json"); err != nil {
		return nil, err
	}
	var names []string
	for _, ct := range list.Containers {
		names = append(names, ct.Metadata.Name)
	}
	return names, nil
}

// killPod SIGKILLs every running container of the pod at once.
func (c *cri) killPod(p *Pod) error {
	names, err := c.running(p)
	if err != nil {
		return err
	}
	for _, name := range names {
		dir, err := c.containerCgroup(p, name)
		if errors.Is(err, ErrNotRunning) {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0o644); err != nil {
			return fmt.Errorf("%s: kill container %q: %w", p, name, err)
		}
	}
	return nil
}

// signalKubelet sends sig to the kubelet up.sh started (.cluster/pids/kubelet.pid).
func (c *cri) signalKubelet(sig syscall.Signal) error {
	pidFile := filepath.Join(c.dir, "pids", "kubelet.pid")
	pid, err := strconv.Atoi(readTrimmed(pidFile))
	if err != nil {
		return fmt.Errorf("no kubelet pid in %s (is the real node up?)", pidFile)
	}
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if strings.TrimSpace(string(comm)) != "kubelet" {
		return fmt.Errorf("process %d of %s is not the kubelet (is the real node up?)", pid, pidFile)
	}
	return syscall.Kill(pid, sig)
}

// Release releases every orphan of that name (there may be several after repeated orphaning of a
// StatefulSet's pod); none is harmless as long as a pod of that name runs on the node.
func (n *Node) Release(ns, name string) error {
	pods, err := n.Pods()
	if err != nil {
		return err
	}
	found := false
	for _, p := range pods {
		if p.Namespace != ns || p.Name != name {
			continue
		}
		found = true
		if err := p.Release(); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("%s/%s: %w", ns, name, ErrUnknownPod)
	}
	return nil
}
