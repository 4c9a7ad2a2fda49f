package fault

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

// Pods and containers come from the CRI through crictl, and a container's processes are in its
// cgroup of the v2 tree, where runc puts every container next to the v1 controllers' cgroups
// (kubepods[/<qos>]/pod<uid>/<container id>); cgroup.kill and cgroup.freeze work there.

type cri struct {
	crictl string // the crictl executable
	config string // <cluster dir>/crictl.yaml
	mount  string // the cgroup v2 mount
	dir    string // the cluster's state (.cluster): orphan markers, the kubelet's pid
}

func (c *cri) run(v any, args ...string) error {
	out, err := exec.Command(c.crictl, append([]string{"--config", c.config}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return fmt.Errorf("crictl %s: %w", strings.Join(args, " "), err)
	}
	return json.Unmarshal(out, v)
}

type criPods struct {
	Items []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Created  string `json:"createdAt"`
		Metadata struct{ Name, UID, Namespace string }
	} `json:"items"`
}

func (c *cri) pods(n *Node) ([]*Pod, error) {
	var list criPods
	if err := c.run(&list, "pods", "--state", "ready", "-o", "json"); err != nil {
		return nil, err
	}
	var pods []*Pod
	for _, s := range list.Items {
		created, _ := strconv.ParseInt(s.Created, 10, 64)
		pods = append(pods, &Pod{node: n, Namespace: s.Metadata.Namespace, Name: s.Metadata.Name,
			UID: s.Metadata.UID, Since: time.Unix(0, created), sandbox: s.ID})
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].String() < pods[j].String() })
	return pods, nil
}

type criContainers struct {
	Containers []struct {
		ID       string `json:"id"`
		State    string `json:"state"`
		Metadata struct{ Name string }
	} `json:"containers"`
}

func (c *cri) containers(p *Pod) []string {
	var list criContainers
	if c.run(&list, "ps", "--all", "--pod", p.sandbox, "-o", "json") != nil {
		return nil
	}
	seen := map[string]bool{}
	var names []string
	for _, ct := range list.Containers {
		if !seen[ct.Metadata.Name] {
			seen[ct.Metadata.Name] = true
			names = append(names, ct.Metadata.Name)
		}
	}
	sort.Strings(names)
	return names
}

// containerCgroup is the running container's cgroup v2 directory: ErrUnknownContainer for a
// name the pod never ran, ErrNotRunning for one that has no running process now.
func (c *cri) containerCgroup(p *Pod, container string) (string, error) {
	pid, err := c.containerPID(p, container)
	if err != nil {
		return "", err
	}
	return c.cgroupOf(pid)
}

// containerPID is the host pid of the running container's first process.
func (c *cri) containerPID(p *Pod, container string) (int, error) {
	var list criContainers
	if err := c.run(&list, "ps", "--all", "--pod", p.sandbox, "-o", "json"); err != nil {
		return 0, err
	}
	known := false
	for _, ct := range list.Containers {
		if ct.Metadata.Name != container {
			continue
		}
		known = true
		if ct.State == "CONTAINER_RUNNING" {
			return c.pid(ct.ID)
		}
	}
	if known {
		return 0, fmt.Errorf("%s: container %q: %w", p, container, ErrNotRunning)
	}
	return 0, fmt.Errorf("%s: container %q: %w (containers: %s)", p, container, ErrUnknownContainer,
		strings.Join(c.containers(p), ", "))
}

// pid is the host pid of a container's first process.
func (c *cri) pid(id string) (int, error) {
	var info struct {
		Info struct{ Pid int } `json:"info"`
	}
	if err := c.run(&info, "inspect", "-o", "json", id); err != nil {
		return 0, err
	}
	if info.Info.Pid == 0 {
		return 0, fmt.Errorf("container %s: %w", id, ErrNotRunning)
	}
	return info.Info.Pid, nil
}

// cgroupOf reads a process's cgroup v2 path ("0::<path>" in /proc/<pid>/cgroup).
func (c *cri) cgroupOf(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("%w: process %d: %v", ErrNotRunning, pid, err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(c.mount, path), nil
		}
	}
	return "", fmt.Errorf("process %d is in no cgroup v2 directory (cgroup.freeze and cgroup.kill need one)", pid)
}

type criSandbox struct {
	Status struct {
		Network struct{ IP string } `json:"network"`
	} `json:"status"`
	Info struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

func (c *cri) sandbox(p *Pod) criSandbox {
	var s criSandbox
	_ = c.run(&s, "inspectp", "-o", "json", p.sandbox)
	return s
}

func (c *cri) ip(p *Pod) string { return c.sandbox(p).Status.Network.IP }

// netns is the name (under /run/netns) of the sandbox's network namespace.
func (c *cri) netns(p *Pod) string {
	for _, ns := range c.sandbox(p).Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			return filepath.Base(ns.Path)
		}
	}
	return ""
}

// openCRI is the node of the cluster in clusterDir.
func openCRI(clusterDir string) (*cri, error) {
	mount, err := nodestate.Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	// crictl: $KSHARD_CRICTL, or the one the cluster runs with (node.sh links it), or PATH's.
	bin := os.Getenv("KSHARD_CRICTL")
	if bin == "" {
		bin = filepath.Join(clusterDir, "crictl")
		if _, err := os.Stat(bin); err != nil {
			if bin, err = exec.LookPath("crictl"); err != nil {
				return nil, fmt.Errorf("no crictl in %s (is the cluster up?), $KSHARD_CRICTL or PATH", clusterDir)
			}
		}
	}
	return &cri{crictl: bin, config: filepath.Join(clusterDir, "crictl.yaml"), mount: mount, dir: clusterDir}, nil
}

// PodCgroup is the cgroup v2 directory of the pod with that UID, kubepods[/<qos>]/pod<uid>:
// every process of the pod, its sandbox's included, is in a cgroup below it. The kubelet removes
// it once the pod has ended and its object is gone. ErrUnknownPod when there is none.
func PodCgroup(uid string) (string, error) {
	mount, err := nodestate.Cgroup2Mount()
	if err != nil {
		return "", err
	}
	for _, pattern := range []string{"kubepods/pod" + uid, "kubepods/*/pod" + uid} {
		if found, _ := filepath.Glob(filepath.Join(mount, pattern)); len(found) == 1 {
			return found[0], nil
		}
	}
	return "", fmt.Errorf("no cgroup of pod uid %s under %s/kubepods: %w", uid, mount, ErrUnknownPod)
}
