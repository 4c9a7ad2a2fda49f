package agent

import (
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

// event is a container event of this runner's pod and container at time ts.
func (r *runner) event(kind string, ts time.Time, pid int) nodestate.ContainerEvent {
	return nodestate.ContainerEvent{TsUs: ts.UnixMicro(), Event: kind, Namespace: r.w.ns, Pod: r.w.name,
		UID: string(r.w.uid), Container: r.spec.Name, PID: pid}
}

func (r *runner) recordStart(ts time.Time, pid int) {
	r.w.a.Lifecycle.Record(r.event(nodestate.EventStart, ts, pid))
}

func (r *runner) recordExit(ts time.Time, pid int, exitCode, signal int32) {
	e := r.event(nodestate.EventExit, ts, pid)
	e.ExitCode, e.Signal = &exitCode, &signal
	r.w.a.Lifecycle.Record(e)
}
