package nodestate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// Container lifecycle events, one JSON object per line of containers.jsonl.
const (
	EventStart = "start"
	EventExit  = "exit"
)

// ContainerEvent is one line of containers.jsonl. TsUs is wall-clock time (time.Now(), as the
// containers' own clocks read it) in microseconds since the epoch:
//   - start: taken just before the process was forked, so everything the process did happened
//     at or after TsUs;
//   - exit: taken once the agent's wait for the process returned and the container's cgroup was
//     empty (anything the process left was killed), so everything the container's processes did
//     happened at or before TsUs.
//
// ExitCode and Signal are set on exit lines only (Signal 0 when the process exited by itself;
// ExitCode is then 128+Signal, as a kubelet reports it).
type ContainerEvent struct {
	TsUs      int64  `json:"ts_us"`
	Event     string `json:"event"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	Container string `json:"container"`
	PID       int    `json:"pid"`
	ExitCode  *int32 `json:"exit_code,omitempty"`
	Signal    *int32 `json:"signal,omitempty"`
}

// ReadContainerEvents reads containers.jsonl in file order (which is write order: an exit line
// can precede the start line of another container with a smaller TsUs). A missing file is no
// events.
func ReadContainerEvents(path string) ([]ContainerEvent, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ContainerEvent
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var e ContainerEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
