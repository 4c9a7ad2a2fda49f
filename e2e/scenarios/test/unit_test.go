package scenariotest

// Tests of the scenarios' pure helpers; they need no cluster.

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kshard.local/e2e/scenarios/eventlog"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
	"kshard.local/e2e/support/shards"
)

func TestCoveringEntitiesHaveEveryShardExactlyOnce(t *testing.T) {
	es := load.CoveringEntities("run-c", 300, 1)
	if len(es) != 300 {
		t.Fatalf("%d entities, want 300", len(es))
	}
	seen := map[int]bool{}
	for _, e := range es {
		if e.Shard != shardid.Of(e.ID, 300) {
			t.Fatalf("%s: shard %d, computed %d", e.ID, e.Shard, shardid.Of(e.ID, 300))
		}
		if seen[e.Shard] {
			t.Fatalf("shard %d twice", e.Shard)
		}
		seen[e.Shard] = true
	}
	two := load.CoveringEntities("x", 10, 2)
	if len(two) != 20 {
		t.Fatalf("%d entities, want 20", len(two))
	}
}

func TestOneEntityPerShardReportsMissingShards(t *testing.T) {
	es := []*load.Entity{{ID: "a", Shard: 1}, {ID: "b", Shard: 1}, {ID: "c", Shard: 3}}
	picked, missing := load.OneEntityPerShard(es, []int{1, 2, 3})
	if len(picked) != 2 || picked[0].ID != "a" || picked[1].ID != "c" || len(missing) != 1 || missing[0] != 2 {
		t.Fatalf("picked %v, missing %v", picked, missing)
	}
}

func mapOf(t *testing.T, count int, pods []string, assignments ...shardmap.Assignment) *shardmap.ShardMap {
	t.Helper()
	m := &shardmap.ShardMap{Shards: count, Owners: make([]string, count)}
	for _, p := range pods {
		m.Status.Pods = append(m.Status.Pods, shardmap.Pod{Name: p})
	}
	for _, a := range assignments {
		ids, err := shards.Parse(a.Shards)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ids {
			m.Owners[s-1] = a.Pod
		}
	}
	return m
}

func TestBalancedIsWithinOneOverTheRegisteredPods(t *testing.T) {
	m := mapOf(t, 10, []string{"a", "b", "c"}, shardmap.Assignment{Pod: "a", Shards: "1-4"},
		shardmap.Assignment{Pod: "b", Shards: "5-7"}, shardmap.Assignment{Pod: "c", Shards: "8-10"})
	if ok, msg := m.Balanced(3); !ok {
		t.Fatalf("4/3/3 is balanced: %s", msg)
	}
	if ok, _ := m.Balanced(2); ok {
		t.Fatal("3 pods are not 2")
	}
	m = mapOf(t, 10, []string{"a", "b", "c"}, shardmap.Assignment{Pod: "a", Shards: "1-5"},
		shardmap.Assignment{Pod: "b", Shards: "6-8"}, shardmap.Assignment{Pod: "c", Shards: "9-10"})
	if ok, _ := m.Balanced(3); ok {
		t.Fatal("5/3/2 is not balanced")
	}
	m = mapOf(t, 10, []string{"a", "b", "c"}, shardmap.Assignment{Pod: "a", Shards: "1-3"},
		shardmap.Assignment{Pod: "b", Shards: "4-6"}, shardmap.Assignment{Pod: "c", Shards: "7-9"})
	if ok, _ := m.Balanced(3); ok {
		t.Fatal("an unassigned shard is not balanced")
	}
	m = mapOf(t, 10, []string{"a", "b", "c"}, shardmap.Assignment{Pod: "a", Shards: "1-5"},
		shardmap.Assignment{Pod: "b", Shards: "6-10"})
	if ok, _ := m.Balanced(3); ok {
		t.Fatal("a registered pod with no shard is not balanced")
	}
}

func TestShardsNotOnVersion(t *testing.T) {
	m := mapOf(t, 4, nil, shardmap.Assignment{Pod: "new", Shards: "1-3"}, shardmap.Assignment{Pod: "old", Shards: "4"})
	m.Status.Pods = []shardmap.Pod{{Name: "new", Version: "1.1.0"}, {Name: "old", Version: "1.0.0"}}
	if off := shardsNotOnVersion(m, "1.1.0"); !strings.Contains(off, "old (v1.0.0):1") {
		t.Fatalf("got %q", off)
	}
	m.Owners[3] = "new"
	if off := shardsNotOnVersion(m, "1.1.0"); off != "" {
		t.Fatalf("got %q", off)
	}
}

const getShardMaps = `NAME      SHARDS   PODS   UNASSIGNED   READY   LOAD   AGE
counter   300      3      0            True    1.2    2m10s
`

func TestCheckGetShardMaps(t *testing.T) {
	if p := checkGetShardMaps(getShardMaps, "counter", []string{"300", "3", "0", "True"}); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	if p := checkGetShardMaps(getShardMaps, "counter", []string{"300", "2", "0", "True"}); len(p) != 1 || !strings.Contains(p[0], "PODS") {
		t.Fatalf("problems: %v", p)
	}
	noReady := strings.ReplaceAll(getShardMaps, "READY   ", "")
	noReady = strings.ReplaceAll(noReady, "True    ", "")
	if p := checkGetShardMaps(noReady, "counter", []string{"300", "3", "0", "True"}); len(p) == 0 {
		t.Fatal("a missing column was not noticed")
	}
	if p := checkGetShardMaps(getShardMaps, "other", nil); len(p) != 1 {
		t.Fatalf("problems: %v", p)
	}
}

func TestFailuresByCause(t *testing.T) {
	reqs := []load.Request{
		{OK: true, Entry: "x", Shard: 1},
		{Entry: "x", Shard: 2},
		{Entry: "y", Shard: 1},
		{Entry: "y", Shard: 5},
	}
	got := failuresByCause(reqs, "x", []int{1})
	if got != "1 entered through the crashed pod, 1 for its shards through other pods, 1 other" {
		t.Fatal(got)
	}
}

func TestReportRendersEveryScenarioAndFigure(t *testing.T) {
	rep := &Report{Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Command: "bash e2e/scenarios/run.sh", Commit: "abc"}
	r := &ScenarioReport{Number: 1, Name: "crash", Title: "Crash", Status: "failed", Seconds: 12.3}
	r.figure("kill → full service", "812 ms")
	r.figure("kill → full service", "813 ms") // a figure measured again replaces the first
	r.requests("continuous", load.Stats{Sent: 10, Acked: 8, Failed: 2, FailReasons: map[string]int{"http 504 SendTimeout": 2}})
	r.failure("something broke")
	rep.Scenarios = append(rep.Scenarios, r, &ScenarioReport{Number: 2, Name: "x", Title: "X", Status: "skipped"})
	rep.finish(rep.Started.Add(90 * time.Second))
	if rep.Failed != 1 || rep.Skipped != 1 || rep.Seconds != 90 {
		t.Fatalf("counts %d/%d/%d, %v s", rep.Passed, rep.Failed, rep.Skipped, rep.Seconds)
	}
	md := rep.markdown()
	for _, want := range []string{"| 1 | Crash | FAILED | 2 / 10 | kill → full service: 813 ms |", "2 × http 504 SendTimeout",
		"**failure**: something broke", "`bash e2e/scenarios/run.sh` at commit `abc`", "## 2. X: skipped"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"name":"kill → full service","value":"813 ms"`) {
		t.Fatalf("json %s, %v", b, err)
	}
}

// fakeCounter serves the counter's public API from memory, as one pod would.
type fakeCounter struct {
	mu     sync.Mutex
	values map[string]int64
}

func (f *fakeCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/counters/")
	f.mu.Lock()
	if strings.HasSuffix(id, "/increment") && r.Method == http.MethodPost {
		id = strings.TrimSuffix(id, "/increment")
		f.values[id]++
	}
	v := f.values[id]
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(load.Reply{ID: id, Value: v, Pod: "fake"})
}

type staticPods []load.Pod

func (p staticPods) Ready() []load.Pod { return p }

func TestDriverReadAllAndProbesAgainstAFakeCounter(t *testing.T) {
	srv := httptest.NewServer(&fakeCounter{values: map[string]int64{}})
	defer srv.Close()
	host, portText, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(portText)
	pods := staticPods{{Name: "fake", IP: host}}
	entities := load.CoveringEntities("unit", 20, 2)
	rec := &load.Recorder{}
	start := time.Now()
	d := load.Start(load.Config{Name: "unit", Entities: entities, Rate: 2000, Increments: 5, Pods: pods,
		Recorder: rec, Port: port, Timeout: 5 * time.Second})
	select {
	case <-d.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the driver did not finish")
	}
	st := load.Summarize(load.Of(rec.Overlapping(start, time.Now()), "unit"), time.Since(start))
	if st.Sent != 200 || st.Acked != 200 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
	client := load.NewClient(port, 5*time.Second)
	if errs := load.ReadAll(client, pods, entities, 4, time.Now().Add(10*time.Second)); len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, e := range entities {
		if len(e.Violations) > 0 || e.Last != 5 || e.Acked != 5 {
			t.Fatalf("%s: last %d, acked %d, violations %v", e.ID, e.Last, e.Acked, e.Violations)
		}
	}
	if f := probePass(client, pods, entities); len(f) > 0 {
		t.Fatal(f)
	}
	if f := probePass(client, staticPods{}, entities[:1]); len(f) != 1 || !strings.Contains(f[0], "no ready pod") {
		t.Fatalf("without pods: %v", f)
	}
}

func TestConfigDefaultsToTheCppCounter(t *testing.T) {
	for _, name := range []string{"COUNTER_APP", "COUNTER_NAMESPACE", "COUNTER_NAME", "COUNTER_IMAGE", "KSHARD_COUNTER_EVENT_LOG"} {
		t.Setenv(name, "")
	}
	cfg := loadConfig()
	got := []string{cfg.counterApp, cfg.counterNS, cfg.counterName, cfg.counterLabels(), cfg.counterImageOf("1.1.0"), cfg.eventLog}
	want := []string{"cpp", "demo", "counter", "app.kubernetes.io/name=counter", "kshard/counter:1.1.0", "/tmp/kshard-counter/events.log"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("defaults %v, want %v", got, want)
	}

	t.Setenv("COUNTER_APP", "go")
	t.Setenv("COUNTER_NAMESPACE", "demo-go")
	t.Setenv("COUNTER_NAME", "go-counter")
	t.Setenv("COUNTER_IMAGE", "kshard/go-counter")
	cfg = loadConfig()
	if cfg.counterLabels() != "app.kubernetes.io/name=go-counter" || cfg.counterImageOf("1.0.0") != "kshard/go-counter:1.0.0" {
		t.Fatalf("go: labels %q, image %q", cfg.counterLabels(), cfg.counterImageOf("1.0.0"))
	}
}

func TestSingletonActiveOnFollowsTheLastEventAndDeaths(t *testing.T) {
	at := func(s int) int64 { return time.Unix(1000+int64(s), 0).UnixMicro() }
	ev := func(s int, event, pod string) eventlog.Event {
		return eventlog.Event{TsUs: at(s), Event: event, Entity: "singleton-ticker", Pod: pod}
	}
	events := []eventlog.Event{
		ev(1, "activate", "a"), ev(2, "stop", "a"), ev(3, "activate", "b"),
		ev(4, "activate", "c"), {TsUs: at(5), Event: "activate", Entity: "other", Pod: "a"},
		{TsUs: at(6), Event: "activate", Entity: "singleton-ticker", Pod: "old-cluster"},
	}
	kept := keepSingletonEvents(events, map[string]bool{"a": true, "b": true, "c": true})
	if len(kept) != 4 {
		t.Fatalf("kept %d events, want the 4 singleton events of this installation's pods", len(kept))
	}
	deaths := map[string][]time.Time{"c": {time.Unix(1010, 0)}}
	if got := rememberedActiveOn(kept, "singleton-ticker", deaths); len(got) != 1 || got[0] != "b" {
		t.Fatalf("active on %v, want [b]: a stopped, c died after its activation", got)
	}
	if got := rememberedActiveOn(kept, "singleton-ticker", nil); len(got) != 2 {
		t.Fatalf("active on %v, want [b c]", got)
	}
}
