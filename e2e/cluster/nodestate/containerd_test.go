package nodestate

import (
	"testing"
)

// Lines as containerd 1.6's `ctr events` prints them (trimmed), for a pod's sandbox and one
// container that was killed.
var ctrLines = []string{
	`2026-11-27 05:22:56.739290473 +0000 UTC k8s.io /containers/create {"id":"sb","image":"docker.io/kshard/pause:dev"}`,
	`2026-11-27 05:22:56.811248655 +0000 UTC k8s.io /tasks/create {"container_id":"sb","bundle":"/run/x","pid":15886}`,
	`2026-11-27 05:22:56.924347560 +0000 UTC k8s.io /tasks/create {"container_id":"app1","bundle":"/run/y","pid":15939}`,
	`2026-11-27 05:22:56.932673391 +0000 UTC k8s.io /tasks/start {"container_id":"app1","pid":15939}`,
	`2026-11-27 05:22:57.000000000 +0000 UTC k8s.io /tasks/exit {"container_id":"app1","id":"exec-1","pid":16000,"exit_status":0,"exited_at":"2026-11-27T05:22:57Z"}`,
	`2026-11-27 05:22:58.976958667 +0000 UTC k8s.io /tasks/exit {"container_id":"app1","id":"app1","pid":15939,"exit_status":137,"exited_at":"2026-11-27T05:22:58.976907672Z"}`,
	`2026-11-27 05:23:00.297242078 +0000 UTC k8s.io /tasks/exit {"container_id":"sb","id":"sb","pid":15886,"exit_status":137,"exited_at":"2026-11-27T05:23:00.297199512Z"}`,
	`2026-11-27 05:23:01.000000000 +0000 UTC moby /tasks/create {"container_id":"other","pid":1}`,
}

func TestLifecycleRecorderLogsStartsAndExitsOfPodContainersOnly(t *testing.T) {
	dir := t.TempDir()
	log, err := OpenLifecycleLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]string{
		"sb": {"io.cri-containerd.kind": "sandbox", "io.kubernetes.pod.namespace": "demo", "io.kubernetes.pod.name": "p"},
		"app1": {"io.cri-containerd.kind": "container", "io.kubernetes.pod.namespace": "demo",
			"io.kubernetes.pod.name": "p", "io.kubernetes.pod.uid": "u1", "io.kubernetes.container.name": "app"},
	}
	lookups := 0
	r := &LifecycleRecorder{Log: log, Lookup: func(id string) (PodContainer, bool, error) {
		lookups++
		c, ok := PodContainerOf(labels[id])
		return c, ok, nil
	}}
	for _, l := range ctrLines {
		e, err := ParseCtrEvent(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Handle(e); err != nil {
			t.Fatal(err)
		}
	}
	events, err := ReadContainerEvents(ContainerEventsFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Fatalf("want a start and an exit of demo/p app, got %+v", events)
	}
	start, exit := events[0], events[1]
	if start.Event != EventStart || start.Pod != "p" || start.UID != "u1" || start.Container != "app" || start.PID != 15939 ||
		start.TsUs != 1795756976924347 {
		t.Errorf("start: %+v", start)
	}
	if exit.Event != EventExit || exit.PID != 15939 || exit.TsUs != 1795756978976907 ||
		exit.ExitCode == nil || *exit.ExitCode != 137 || exit.Signal == nil || *exit.Signal != 9 {
		t.Errorf("exit (the shim's exit time, the signal from the status): %+v", exit)
	}
	if lookups != 2 {
		t.Errorf("%d label lookups, want one per container (the exit uses what the start found)", lookups)
	}
}

func TestParseCtrEventRefusesWhatIsNotAnEventLine(t *testing.T) {
	for _, l := range []string{
		"", "ctr: rpc error: code = Unavailable desc = transport is closing",
		"2026-11-27 05:22:56 +0000 UTC k8s.io /tasks/exit {not json",
		"yesterday at noon UTC k8s.io /tasks/exit {}",
	} {
		if _, err := ParseCtrEvent(l); err == nil {
			t.Errorf("%q parsed", l)
		}
	}
}
