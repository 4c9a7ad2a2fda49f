package nodestate

import (
	"fmt"
	"sync"
	"testing"
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
				logs[w%2].Record(ContainerEvent{TsUs: int64(i), Event: EventExit, Namespace: "ns",
					Pod: fmt.Sprintf("pod-%d-with-a-longer-name-%0100d", w, i), UID: "u", Container: "app", PID: i,
					ExitCode: &code, Signal: &sig})
			}
		}(w)
	}
	wg.Wait()
	events, err := ReadContainerEvents(ContainerEventsFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != writers*each {
		t.Fatalf("%d events, want %d", len(events), writers*each)
	}
	for _, e := range events {
		if e.Event != EventExit || *e.Signal != 9 || *e.ExitCode != 137 {
			t.Fatalf("bad event %+v", e)
		}
	}
}
