// Package fault injects faults into pods of the local cluster's node (e2e/cluster): it SIGKILLs a
// container, freezes and thaws it (cgroup v2 freezer), partitions a pod from the API server or
// other pods (iptables rules inside the pod's network namespace), and orphans a pod (its node
// keeps it running after its object is deleted, as a node cut off from the API server would). It
// finds pods and containers through the CRI (crictl against the node's containerd) and needs no
// API server; it must run as root on the node. e2e/cluster/fault.sh is its command line;
// README.md's "Fault injection" says what each fault models and where it falls short.
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

// DefaultTimeout is how long a verb waits for its effect (processes gone, cgroup frozen) before
// it fails.
const DefaultTimeout = 20 * time.Second

// Node is the local cluster's node as the fault tool reaches it.
type Node struct {
	LogDir  string        // <cluster dir>/logs (containers.jsonl)
	Timeout time.Duration // how long a verb waits for its effect
	rt      runtime
}

// runtime is where the node's pods and containers are found: the CRI (cri.go), or a test's fake.
type runtime interface {
	pods(n *Node) ([]*Pod, error)
	containers(p *Pod) []string
	// containerCgroup is the container's cgroup v2 directory, or ErrUnknownContainer (or, where
	// the runtime tells, ErrNotRunning).
	containerCgroup(p *Pod, container string) (string, error)
	// containerPID is the host pid of the running container's first process (errors as above).
	containerPID(p *Pod, container string) (int, error)
	ip(p *Pod) string
	netns(p *Pod) string
	orphaned(p *Pod) bool
	orphan(p *Pod) error
	release(p *Pod) error
}

// Open returns the node of the cluster whose state is in clusterDir (.cluster, or
// $KSHARD_CLUSTER_DIR).
func Open(clusterDir string) (*Node, error) {
	rt, err := openCRI(clusterDir)
	if err != nil {
		return nil, err
	}
	return &Node{LogDir: filepath.Join(clusterDir, "logs"), Timeout: DefaultTimeout, rt: rt}, nil
}

// Pod is one pod on the node, named by its UID: a pod deleted and created again under the same
// name (a StatefulSet's) is another Pod.
type Pod struct {
	node      *Node
	Namespace string
	Name      string
	UID       string
	Since     time.Time // when the node took the pod on
	sandbox   string    // the pod's sandbox ID
}

func (p *Pod) String() string { return fmt.Sprintf("%s/%s (uid %s)", p.Namespace, p.Name, p.UID) }

// Pods lists every pod whose sandbox is ready on the node, orphans included.
func (n *Node) Pods() ([]*Pod, error) { return n.rt.pods(n) }

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

func readTrimmed(path string) string {
	raw, _ := os.ReadFile(path)
	return strings.TrimSpace(string(raw))
}

// ContainerEvents reads the node's container lifecycle log (containers.jsonl,
// cmd/kshard-node-recorder).
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
