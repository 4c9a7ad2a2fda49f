// Package fault injects faults into pods of the local cluster's node (e2e/cluster): it SIGKILLs a
// container, freezes and thaws it (cgroup v2 freezer), partitions a pod from the API server or
// other pods (iptables rules inside the pod's network namespace), and orphans a pod (the node
// agent keeps it running after its object is deleted, as a node cut off from the API server
// would). It works on the node agent's files (package nodestate) and needs no API server; it must
// run as root on the node. e2e/cluster/fault.sh is its command line; README.md's "Fault
// injection" says what each fault models and where it falls short.
package fault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

var (
	// ErrUnknownPod: no pod of that name (or UID) runs on the node.
	ErrUnknownPod = errors.New("pod does not run on this node")
	// ErrUnknownContainer: the pod has no container of that name (that has ever started).
	ErrUnknownContainer = errors.New("pod has no such container")
	// ErrNotRunning: the container has no process (it is waiting to be restarted, or finished).
	ErrNotRunning = errors.New("container has no running process")
)

// DefaultTimeout is how long a verb waits for its effect (processes gone, cgroup frozen, the
// agent's acknowledgement) before it fails.
const DefaultTimeout = 20 * time.Second

// Node is the local cluster's node as the fault tool reaches it.
type Node struct {
	StateDir   string        // the node agent's state: <cluster dir>/agent
	LogDir     string        // <cluster dir>/logs (containers.jsonl)
	CgroupRoot string        // <cgroup2 mount>/kshard
	Timeout    time.Duration // how long a verb waits for its effect
	rt         runtime
}

// runtime is where the node's pods and containers are found: the node agent's files (agent), or
// the real node's CRI (cri).
type runtime interface {
	pods(n *Node) ([]*Pod, error)
	containers(p *Pod) []string
	// containerCgroup is the container's cgroup v2 directory, or ErrUnknownContainer (or, where
	// the runtime tells, ErrNotRunning).
	containerCgroup(p *Pod, container string) (string, error)
	ip(p *Pod) string
	netns(p *Pod) string
	orphaned(p *Pod) bool
	orphan(p *Pod) error
	release(p *Pod) error
}

// Open returns the node of the cluster whose state is in clusterDir (.cluster, or
// $KSHARD_CLUSTER_DIR): the node agent's, or the real node's when up.sh started one
// (KSHARD_NODE=kubelet, state/node).
func Open(clusterDir string) (*Node, error) {
	mount, err := nodestate.Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	n := &Node{StateDir: filepath.Join(clusterDir, "agent"), LogDir: filepath.Join(clusterDir, "logs"),
		CgroupRoot: filepath.Join(mount, nodestate.CgroupRootName), Timeout: DefaultTimeout, rt: agent{}}
	if readTrimmed(filepath.Join(clusterDir, "state", "node")) == "kubelet" {
		if n.rt, err = openCRI(clusterDir); err != nil {
			return nil, err
		}
		return n, nil
	}
	if _, err := os.Stat(n.StateDir); err != nil {
		return nil, fmt.Errorf("no node agent state at %s (is the cluster up?): %w", n.StateDir, err)
	}
	return n, nil
}

// RealNode says whether this is the real node (the kubelet and containerd), not the agent.
func (n *Node) RealNode() bool { _, ok := n.rt.(*cri); return ok }

// Pod is one pod on the node, named by its UID: a pod deleted and created again under the same
// name (a StatefulSet's) is another Pod.
type Pod struct {
	node      *Node
	Namespace string
	Name      string
	UID       string
	Since     time.Time // when the node took the pod on
	sandbox   string    // the real node's pod sandbox ID
}

func (p *Pod) String() string { return fmt.Sprintf("%s/%s (uid %s)", p.Namespace, p.Name, p.UID) }

func (p *Pod) dir() string { return nodestate.PodDir(p.node.StateDir, p.UID) }

// Pods lists every pod the node runs, the agent's orphans included.
func (n *Node) Pods() ([]*Pod, error) { return n.rt.pods(n) }

// agent is the node agent's runtime: its files in StateDir and its cgroups in CgroupRoot.
type agent struct{}

func (agent) pods(n *Node) ([]*Pod, error) {
	files, err := filepath.Glob(nodestate.PodsGlob(n.StateDir))
	if err != nil {
		return nil, err
	}
	var pods []*Pod
	for _, f := range files {
		raw, err := os.ReadFile(f)
		st, serr := os.Stat(f)
		if err != nil || serr != nil {
			continue // the agent removed the pod meanwhile
		}
		ns, name, ok := strings.Cut(strings.TrimSpace(string(raw)), "/")
		if !ok {
			continue
		}
		pods = append(pods, &Pod{node: n, Namespace: ns, Name: name, UID: filepath.Base(filepath.Dir(f)), Since: st.ModTime()})
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].String() < pods[j].String() })
	return pods, nil
}

// PodByUID returns the pod with that UID.
func (n *Node) PodByUID(uid string) (*Pod, error) {
	pods, err := n.Pods()
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.UID == uid {
			return p, nil
		}
	}
	return nil, fmt.Errorf("uid %s: %w", uid, ErrUnknownPod)
}

// Pod returns the pod of that name. When the name has several pods on the node, it is the one the
// API server knows: not an orphan, and of those the newest (a StatefulSet's pod force-deleted
// without orphaning is still being killed while its replacement starts).
func (n *Node) Pod(ns, name string) (*Pod, error) {
	pods, err := n.Pods()
	if err != nil {
		return nil, err
	}
	var live, orphans []*Pod
	for _, p := range pods {
		switch {
		case p.Namespace != ns || p.Name != name:
		case p.Orphaned():
			orphans = append(orphans, p)
		default:
			live = append(live, p)
		}
	}
	switch {
	case len(live) > 0:
		sort.Slice(live, func(i, j int) bool { return live[i].Since.After(live[j].Since) })
		return live[0], nil
	case len(orphans) == 1:
		return orphans[0], nil
	case len(orphans) == 0:
		return nil, fmt.Errorf("%s/%s: %w (pods here: %s)", ns, name, ErrUnknownPod, n.podNames(pods))
	}
	return nil, fmt.Errorf("%s/%s names several orphans on this node (%v): name one by its UID", ns, name, orphans)
}

func (n *Node) podNames(pods []*Pod) string {
	if len(pods) == 0 {
		return "none"
	}
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Namespace + "/" + p.Name
	}
	return strings.Join(names, ", ")
}

// IP is the pod's address (empty before its sandbox exists).
func (p *Pod) IP() string { return p.node.rt.ip(p) }

// NetNS is the name of the pod's network namespace (empty before its sandbox exists).
func (p *Pod) NetNS() string { return p.node.rt.netns(p) }

// Containers lists the pod's containers that have started at least once.
func (p *Pod) Containers() []string { return p.node.rt.containers(p) }

func (agent) ip(p *Pod) string    { return readTrimmed(filepath.Join(p.dir(), nodestate.PodIPFile)) }
func (agent) netns(p *Pod) string { return readTrimmed(filepath.Join(p.dir(), nodestate.PodNetNSFile)) }

func (agent) containers(p *Pod) []string {
	entries, _ := os.ReadDir(nodestate.PodCgroup(p.node.CgroupRoot, p.UID))
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func readTrimmed(path string) string {
	raw, _ := os.ReadFile(path)
	return strings.TrimSpace(string(raw))
}

// ContainerEvents reads the node agent's container lifecycle log (containers.jsonl).
func (n *Node) ContainerEvents() ([]nodestate.ContainerEvent, error) {
	return nodestate.ReadContainerEvents(nodestate.ContainerEventsFile(n.LogDir))
}

// waitUntil polls cond until it holds or the node's timeout passes; the error says what did not
// happen.
func (n *Node) waitUntil(what string, cond func() bool) error {
	deadline := time.Now().Add(n.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", n.Timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Each verb of Pod, by namespace and name (Node.Pod says which pod a name means).

func (n *Node) withPod(ns, name string, f func(*Pod) error) error {
	p, err := n.Pod(ns, name)
	if err != nil {
		return err
	}
	return f(p)
}

// Kill SIGKILLs every process of the container (Pod.Kill).
func (n *Node) Kill(ns, pod, container string) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Kill(container) })
}

// Freeze freezes the container (Pod.Freeze).
func (n *Node) Freeze(ns, pod, container string) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Freeze(container) })
}

// Thaw thaws the container (Pod.Thaw).
func (n *Node) Thaw(ns, pod, container string) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Thaw(container) })
}

// Partition drops the pod's traffic with the targets (Pod.Partition).
func (n *Node) Partition(ns, pod string, targets []Target) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Partition(targets) })
}

// Heal removes every partition of the pod (Pod.Heal).
func (n *Node) Heal(ns, pod string) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Heal() })
}

// Orphan makes the pod an orphan (Pod.Orphan).
func (n *Node) Orphan(ns, pod string) error {
	return n.withPod(ns, pod, func(p *Pod) error { return p.Orphan() })
}
