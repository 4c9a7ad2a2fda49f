package nodestate

import (
	"encoding/json"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// LifecycleLog appends one JSON line per container process start and exit to containers.jsonl
// (ContainerEvent), for checkers that order the containers' lives against what the applications
// did. Each line is one write(2) on an O_APPEND file, so lines never interleave, whoever else
// appends. The node's recorder (cmd/kshard-node-recorder) writes it.
type LifecycleLog struct {
	mu   sync.Mutex
	file *os.File
}

// OpenLifecycleLog opens (creating) the log in logDir.
func OpenLifecycleLog(logDir string) (*LifecycleLog, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(ContainerEventsFile(logDir), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LifecycleLog{file: f}, nil
}

// Record writes one event; a failure is logged (the container's life goes on without it).
func (l *LifecycleLog) Record(e ContainerEvent) {
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
