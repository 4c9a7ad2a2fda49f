package agent

import (
	"fmt"
	"sync"
	"testing"

	"kshard.local/e2e/cluster/nodestate"
)

// Writers at once (two agents' logs on one file, many containers) never interleave lines.
func TestLifecycleLogLinesNeverInterleave(t *testing.T) {
	dir := t.TempDir()
	logs := make([]*LifecycleLog, 2)
	for i := range logs {
		l, err := OpenLifecycleLog(dir)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				code, sig := int32(137), int32(9)
				logs[w%2].record(nodestate.ContainerEvent{TsUs: int64(i), Event: nodestate.EventExit, Namespace: "ns",
					Pod: fmt.Sprintf("pod-%d-with-a-longer-name-%0100d", w, i), UID: "u", Container: "app", PID: i,
					ExitCode: &code, Signal: &sig})
			}
		}(w)
	}
	wg.Wait()
	events, err := nodestate.ReadContainerEvents(nodestate.ContainerEventsFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != writers*each {
		t.Fatalf("%d events, want %d", len(events), writers*each)
	}
	for _, e := range events {
		if e.Event != nodestate.EventExit || *e.Signal != 9 || *e.ExitCode != 137 {
			t.Fatalf("bad event %+v", e)
		}
	}
}
