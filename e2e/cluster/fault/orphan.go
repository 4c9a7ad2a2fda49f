package fault

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"kshard.local/e2e/cluster/nodestate"
)

// Orphans model a node cut off from the API server while its pod is deleted (force-deleted, as an
// operator or the node lifecycle controller does for an unreachable node): the API server forgets
// the pod, its controller creates a replacement, and the old pod's processes keep running and
// serving on the cut-off node until it reconnects. The node agent's side is in
// agent/orphans.go; the real node's is in cri_orphan.go.

// Orphaned says whether the pod is held as an orphan.
func (p *Pod) Orphaned() bool { return p.node.rt.orphaned(p) }

// Orphan cuts the pod off from the API server as far as its node is concerned: the node ignores
// the pod's deletion (graceful or forced) and keeps its processes, network namespace and IP
// until Release. Orphaning an orphan is harmless.
func (p *Pod) Orphan() error { return p.node.rt.orphan(p) }

// Release reconnects the orphan: if its pod is gone from the API server, the node ends its
// processes and Release returns once they are gone. Releasing a pod that is not orphaned is
// harmless.
func (p *Pod) Release() error { return p.node.rt.release(p) }

func (agent) orphaned(p *Pod) bool {
	_, err := os.Stat(nodestate.OrphanMarker(p.node.StateDir, p.UID))
	return err == nil
}

func (p *Pod) acknowledged() bool {
	_, err := os.Stat(filepath.Join(p.dir(), nodestate.OrphanedFile))
	return err == nil
}

// The agent's orphan returns once the agent has acknowledged: it ignores the pod's deletion,
// posts no status or events for it, refreshes none of its volumes, and keeps its processes,
// network namespace and IP (no new pod gets that IP) until Release. Its containers still restart
// per the restartPolicy, and its probes still run.
func (agent) orphan(p *Pod) error {
	marker := nodestate.OrphanMarker(p.node.StateDir, p.UID)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(marker, []byte(p.Namespace+"/"+p.Name+"\n"), 0o644); err != nil {
		return err
	}
	err := p.node.waitUntil("the node agent to acknowledge the orphaning of "+p.String(), p.acknowledged)
	if err != nil {
		_ = os.Remove(marker)
		return fmt.Errorf("%w (a node agent built before orphans existed? make cluster-down cluster-up)", err)
	}
	return nil
}

// The agent's release: if the pod is gone from the API server, the agent SIGKILLs every process
// of the pod at once (no preStop, no SIGTERM), records their exits in containers.jsonl and
// removes its sandbox. If the pod still exists, the agent goes on with it (terminating it if it
// is being deleted) and Release returns once the agent has noticed.
func (agent) release(p *Pod) error {
	if !p.Orphaned() && !p.acknowledged() {
		return nil
	}
	if err := os.Remove(nodestate.OrphanMarker(p.node.StateDir, p.UID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return p.node.waitUntil("the node agent to release "+p.String(), func() bool { return !p.acknowledged() })
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
