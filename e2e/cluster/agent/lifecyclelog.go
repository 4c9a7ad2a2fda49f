package agent

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/nodestate"
)

// LifecycleLog appends one JSON line per container process start and exit to containers.jsonl
// (nodestate.ContainerEvent), for checkers that order the containers' lives against what the
// applications did. Each line is one write(2) on an O_APPEND file, so lines never interleave,
// whoever else appends.
type LifecycleLog struct {
	mu   sync.Mutex
	file *os.File
}

// OpenLifecycleLog opens (creating) the log in logDir.
func OpenLifecycleLog(logDir string) (*LifecycleLog, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(nodestate.ContainerEventsFile(logDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LifecycleLog{file: f}, nil
}

// record writes one event; a failure is logged (the container's life goes on without it).
func (l *LifecycleLog) record(e nodestate.ContainerEvent) {
	if l == nil {
		return
	}
	line, err := json.Marshal(e)
	if err != nil {
		klog.ErrorS(err, "encoding a container event")
		return
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.file.Write(line); err != nil {
		klog.ErrorS(err, "writing containers.jsonl", "event", e.Event, "pid", e.PID)
	}
}

// event is a container event of this runner's pod and container at time ts.
func (r *runner) event(kind string, ts time.Time, pid int) nodestate.ContainerEvent {
	return nodestate.ContainerEvent{TsUs: ts.UnixMicro(), Event: kind, Namespace: r.w.ns, Pod: r.w.name,
		UID: string(r.w.uid), Container: r.spec.Name, PID: pid}
}

func (r *runner) recordStart(ts time.Time, pid int) {
	r.w.a.Lifecycle.record(r.event(nodestate.EventStart, ts, pid))
}

func (r *runner) recordExit(ts time.Time, pid int, exitCode, signal int32) {
	e := r.event(nodestate.EventExit, ts, pid)
	e.ExitCode, e.Signal = &exitCode, &signal
	r.w.a.Lifecycle.record(e)
}
