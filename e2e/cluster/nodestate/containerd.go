package nodestate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The real node's container lifecycle comes from containerd's event stream, which `ctr events`
// prints one event per line: "<publish time> <namespace> <topic> <event as JSON>", the time as Go
// prints a time.Time.
const ctrTimeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// CtrEvent is one line of `ctr events`.
type CtrEvent struct {
	Time      time.Time
	Namespace string
	Topic     string
	Event     json.RawMessage
}

// ParseCtrEvent parses one line of `ctr events`.
func ParseCtrEvent(line string) (CtrEvent, error) {
	f := strings.SplitN(strings.TrimSpace(line), " ", 7)
	if len(f) != 7 {
		return CtrEvent{}, fmt.Errorf("not an event line of ctr events: %q", line)
	}
	ts, err := time.Parse(ctrTimeLayout, strings.Join(f[:4], " "))
	if err != nil {
		return CtrEvent{}, fmt.Errorf("the time of %q: %w", line, err)
	}
	if !json.Valid([]byte(f[6])) {
		return CtrEvent{}, fmt.Errorf("the event of %q is not JSON", line)
	}
	return CtrEvent{Time: ts, Namespace: f[4], Topic: f[5], Event: json.RawMessage(f[6])}, nil
}

// TaskEvent holds the fields of containerd's /tasks/create and /tasks/exit events that the
// lifecycle log needs. ID is the exited process's (the container's own for its init process,
// an exec's otherwise).
type TaskEvent struct {
	ContainerID string    `json:"container_id"`
	ID          string    `json:"id"`
	Pid         int       `json:"pid"`
	ExitStatus  int32     `json:"exit_status"`
	ExitedAt    time.Time `json:"exited_at"`
}

// PodContainer is what the CRI's labels on a containerd container say it is.
type PodContainer struct {
	Namespace, Pod, UID, Container string
}

// PodContainerOf reads the labels the kubelet (through the CRI) puts on a pod's container; ok is
// false for anything else (a pod's sandbox, a container of another client).
func PodContainerOf(labels map[string]string) (PodContainer, bool) {
	c := PodContainer{
		Namespace: labels["io.kubernetes.pod.namespace"], Pod: labels["io.kubernetes.pod.name"],
		UID: labels["io.kubernetes.pod.uid"], Container: labels["io.kubernetes.container.name"],
	}
	ok := labels["io.cri-containerd.kind"] == "container" && c.Namespace != "" && c.Pod != "" && c.Container != ""
	return c, ok
}

// LifecycleRecorder turns containerd's task events into containers.jsonl lines: a start when a
// pod container's task is created (before its process runs any of its own code), an exit when
// the task's init process has exited (the other processes of its pid namespace die with it),
// at the time containerd's shim saw it exit.
type LifecycleRecorder struct {
	Log *LifecycleLog
	// Lookup says which pod container a containerd container is (ok false: not one).
	Lookup func(containerID string) (c PodContainer, ok bool, err error)
	// What Lookup said of each container whose task runs (nil: not a pod container).
	known map[string]*PodContainer
}

// Handle records what one event says; events of other namespaces and topics are ignored.
func (r *LifecycleRecorder) Handle(e CtrEvent) error {
	if e.Namespace != "k8s.io" || (e.Topic != "/tasks/create" && e.Topic != "/tasks/exit") {
		return nil
	}
	var t TaskEvent
	if err := json.Unmarshal(e.Event, &t); err != nil {
		return fmt.Errorf("%s event: %w", e.Topic, err)
	}
	if r.known == nil {
		r.known = map[string]*PodContainer{}
	}
	c, seen := r.known[t.ContainerID]
	if !seen {
		found, ok, err := r.Lookup(t.ContainerID)
		if err != nil {
			return fmt.Errorf("container %s: %w", t.ContainerID, err)
		}
		if ok {
			c = &found
		}
		r.known[t.ContainerID] = c
	}
	exited := e.Topic == "/tasks/exit" && t.ID == t.ContainerID
	if exited {
		delete(r.known, t.ContainerID)
	}
	if c == nil {
		return nil
	}
	line := ContainerEvent{Namespace: c.Namespace, Pod: c.Pod, UID: c.UID, Container: c.Container, PID: t.Pid}
	switch {
	case e.Topic == "/tasks/create":
		line.Event, line.TsUs = EventStart, e.Time.UnixMicro()
	case exited:
		code, signal := t.ExitStatus, int32(0)
		if code > 128 {
			signal = code - 128
		}
		line.Event, line.TsUs, line.ExitCode, line.Signal = EventExit, t.ExitedAt.UnixMicro(), &code, &signal
	default:
		return nil // an exec's process
	}
	r.Log.Record(line)
	return nil
}
