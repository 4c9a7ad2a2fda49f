package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/nodestate"
)

// Orphans: the fault tool's model of a node cut off from the API server. While the marker
// <state>/orphans/<uid> exists, the pod's worker acts as a kubelet that cannot reach the API
// server: it sees neither a deletionTimestamp nor the object's removal (a force delete), so its
// containers keep running and restarting and its sandbox and IP stay; it posts no status and no
// events and refreshes no volumes. When the marker goes ("release", the node reconnects), the
// worker looks at the pod again: gone from the API means SIGKILL at once and clean up (the kubelet
// finds a pod that no longer exists), terminating means the graceful termination, otherwise it
// carries on. The worker acknowledges with <pod dir>/orphaned while it holds the pod as an orphan;
// for a released pod that is gone, that file goes with the pod directory once everything is
// cleaned up, so the fault tool knows when a release is complete.

// orphanPollInterval is how soon the agent notices a marker written or removed.
const orphanPollInterval = 100 * time.Millisecond

// orphaned says whether the fault tool holds this pod as an orphan. It reads the marker itself
// rather than the watcher's copy, so that a force delete right after the marker was written is
// already ignored.
func (w *podWorker) orphaned() bool {
	_, err := os.Stat(nodestate.OrphanMarker(w.a.Cfg.StateDir, string(w.uid)))
	return err == nil
}

// watchOrphans acknowledges markers as they appear and wakes the workers whose marker went.
func (a *Agent) watchOrphans(ctx context.Context) {
	t := time.NewTicker(orphanPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		workers := make([]*podWorker, 0, len(a.workers))
		for _, w := range a.workers {
			workers = append(workers, w)
		}
		a.mu.Unlock()
		for _, w := range workers {
			w.syncOrphan()
		}
	}
}

// syncOrphan brings the worker's acknowledgement in line with the marker.
func (w *podWorker) syncOrphan() {
	ack := filepath.Join(w.dir, nodestate.OrphanedFile)
	now, held := w.orphaned(), w.orphanHeld.Load()
	_, gone := w.current()
	switch {
	case now && !held:
		if err := os.WriteFile(ack, []byte(fmt.Sprintf("%d\n", time.Now().UnixMicro())), 0o644); err != nil {
			klog.ErrorS(err, "acknowledging an orphan", "pod", w.ns+"/"+w.name, "uid", w.uid)
			return
		}
		w.orphanHeld.Store(true)
		klog.InfoS("pod orphaned: the node acts as cut off from the API server for it", "pod", w.ns+"/"+w.name, "uid", w.uid)
	case !now && held && !gone:
		_ = os.Remove(ack)
		w.orphanHeld.Store(false)
		klog.InfoS("orphan released; the pod still exists", "pod", w.ns+"/"+w.name, "uid", w.uid)
	case !now && held && !w.releaseSeen.Swap(true):
		// Gone from the API: terminate kills it at once; the acknowledgement goes with the pod
		// directory.
		klog.InfoS("orphan released; the pod is gone from the API: killing its containers", "pod", w.ns+"/"+w.name, "uid", w.uid)
	default:
		return
	}
	signal(w.updateCh)
	w.notifyChanged()
}
