package scenariotest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
	"kshard.local/e2e/support/shards"
)

const (
	// The throttle the scenario sets: one failed handoff withholds a shard, for long enough to
	// see that it is not asked again meanwhile. A short handoffTimeout keeps each failed attempt
	// (and the requests it holds up) short.
	throttleLimit   = 1
	throttleBackoff = 4 * time.Minute
	throttleTimeout = "5s"
	// How many of the stuck pod's shards the throttle must hold back before the fault is
	// cleared: a periodic round tries rebalanceRate x 300 = 6 of them, so this spans rounds.
	throttleAtLeast = 18
)

// scenarioHandoffThrottle (11): the app of the first pod the planner asks for shards cannot stop
// any of the counters the scenario started on that pod's shards (one per shard; the counter's
// fault switch, PUT /faults/stop/{prefix}), so every handoff out of it fails. A fourth replica
// makes the periodic rounds want shards from it. The operator must announce each throttled shard
// with a HandoffThrottled Event and stop asking for it until its backoff has passed (a shard is
// named again only after the backoff, one failure further), and report throttled shards in its
// metrics. Once the fault is cleared, the map balances over four pods, and every stuck counter
// holds exactly what it acknowledged. Everything is restored afterwards (t.Cleanup), the fault
// first: a stop that keeps failing would also block the drains of later scale-downs.
func scenarioHandoffThrottle(c sc, s *suite) {
	s.waitSteady(c, 3)
	m := s.latest()
	stuckPod := firstDonor(m)
	on := shardsOf(m, stuckPod)
	prefix := s.runID + "-stuck"
	stuck, missing := load.OneEntityPerShard(load.EntitiesOnShards(prefix, 40*len(on), on, shardCount), on)
	if len(missing) > 0 {
		c.logf("no stuck counter found for %d shards of %s: %v", len(missing), stuckPod, missing)
	}
	spec := s.throttleSpec(c)
	c.Cleanup(func() {
		s.setStopFault(c, prefix, false)
		s.patchMapSpec(c, fmt.Sprintf(`{"spec":{"handoffFailureLimit":%s,"handoffBackoff":%s,"handoffTimeout":%q}}`,
			spec.limit, spec.backoff, spec.timeout))
		s.scale(c, 3)
		s.waitBalancedOver(c, 3, 6*time.Minute)
	})

	load.EachParallel(stuck, 16, func(e *load.Entity) {
		if _, r, err := s.client.Send(s.pods, e.ID, true); err == nil {
			_ = e.OnAck(r.Value)
		} else {
			e.OnFailure()
		}
	})
	s.setStopFault(c, prefix, true)
	s.patchMapSpec(c, fmt.Sprintf(`{"spec":{"handoffFailureLimit":%d,"handoffBackoff":%q,"handoffTimeout":%q}}`,
		throttleLimit, throttleBackoff.String(), throttleTimeout))
	c.logf("%d counters on the %d shards of %s cannot stop; scaling to 4", len(stuck), len(on), stuckPod)
	start := time.Now()
	s.scale(c, 4)

	first := c.waitUntil(4*time.Minute, "a HandoffThrottled Event names shards of "+stuckPod, func() (bool, string) {
		evs := s.throttleEvents(c, start)
		return len(evs) > 0, fmt.Sprintf("%d HandoffThrottled Events", len(evs))
	})
	c.waitUntil(4*time.Minute, fmt.Sprintf("the operator's metrics show at least %d throttled shards", throttleAtLeast),
		func() (bool, string) {
			n := s.operatorMetric(c, "kshard_operator_throttled_shards")
			return n >= throttleAtLeast, fmt.Sprintf("kshard_operator_throttled_shards %g", n)
		})
	cleared := time.Now()
	s.setStopFault(c, prefix, false)
	evs := s.throttleEvents(c, start)
	throttled := checkThrottleEvents(c, evs, stuckPod, on, cleared)
	c.r.figure("first HandoffThrottled Event after", secs(first))
	c.r.figure("HandoffThrottled Events while the stops failed", len(evs))
	c.r.figure("shards throttled", fmt.Sprintf("%d of the %d shards of %s", throttled, len(on), stuckPod))
	c.r.figure("backoffs begun (kshard_operator_handoff_throttles_total)",
		s.operatorMetric(c, "kshard_operator_handoff_throttles_total"))
	if throttled == 0 {
		c.errorf("no shard of %s was throttled", stuckPod)
	}

	took := s.waitBalancedOver(c, 4, 8*time.Minute)
	c.r.figure("balanced over 4 pods after the fault was cleared", secs(took))
	c.r.figure("shards per pod", fmt.Sprint(mustCounts(s.latest())))
	st := s.window(c, start, time.Now())
	c.r.figure("failed requests (continuous driver)", st.Failed)
	s.checkAcknowledged(c, stuck)
}

// firstDonor: the pod whose shards a periodic round offers first, the one with the most shards,
// the earliest registered on a tie (sharding/planner.h).
func firstDonor(m *shardmap.ShardMap) string {
	best := shardmap.Pod{Shards: -1}
	for _, p := range m.Status.Pods {
		if p.Shards > best.Shards {
			best = p
		}
	}
	return best.Name
}

type throttleSettings struct{ limit, backoff, timeout string }

// throttleSpec reads the settings the scenario changes, as JSON values for the patch that
// restores them (null: the CRD's default).
func (s *suite) throttleSpec(c sc) throttleSettings {
	c.Helper()
	ctx, cancel := apiCtx()
	u, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		c.fatalf("reading ShardMap %s/%s: %v", s.cfg.counterNS, s.cfg.counterName, err)
	}
	out := throttleSettings{limit: "null", backoff: "null", timeout: "30s"}
	if v, ok, _ := unstructured.NestedInt64(u.Object, "spec", "handoffFailureLimit"); ok {
		out.limit = strconv.FormatInt(v, 10)
	}
	if v, ok, _ := unstructured.NestedString(u.Object, "spec", "handoffBackoff"); ok {
		out.backoff = strconv.Quote(v)
	}
	if v, ok, _ := unstructured.NestedString(u.Object, "spec", "handoffTimeout"); ok {
		out.timeout = v
	}
	return out
}

// setStopFault sets (or clears) the counter's stop fault for ids starting with `prefix` on every
// counter pod. Clearing also clears every other prefix.
func (s *suite) setStopFault(c sc, prefix string, on bool) {
	c.Helper()
	method, path := "DELETE", "/faults/stop"
	if on {
		method, path = "PUT", "/faults/stop/"+prefix
	}
	for _, p := range s.pods.All() {
		if p.Status.PodIP == "" {
			continue
		}
		url := "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(publicPort)) + path
		code, body, err := httpDo(method, url, nil, nil)
		if err != nil || code != 200 {
			c.errorf("%s %s on %s: %d %s %v", method, path, p.Name, code, truncate(body, 200), err)
		}
	}
}

type throttleEvent struct {
	at       time.Time
	pod      string
	shards   []int
	failures int
	until    time.Time
	note     string
}

var throttleNote = regexp.MustCompile(`^handoff of shards? (\S+) from pod (\S+) failed (\d+) times in a row; ` +
	`balancing leaves it there until (\S+) \(backoff`)

// throttleEvents lists the HandoffThrottled Events on the counter's ShardMap since `since`,
// oldest first.
func (s *suite) throttleEvents(c sc, since time.Time) []throttleEvent {
	c.Helper()
	ctx, cancel := apiCtx()
	list, err := s.cs.EventsV1().Events(s.cfg.counterNS).List(ctx, metav1.ListOptions{})
	cancel()
	if err != nil {
		c.errorf("listing Events of %s: %v", s.cfg.counterNS, err)
		return nil
	}
	var out []throttleEvent
	for _, e := range list.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if e.Reason != "HandoffThrottled" || e.Regarding.Name != s.cfg.counterName || at.Before(since.Add(-time.Second)) {
			continue
		}
		ev := throttleEvent{at: at, note: e.Note}
		if g := throttleNote.FindStringSubmatch(e.Note); g != nil {
			ev.shards, _ = shards.Parse(g[1])
			ev.pod = g[2]
			ev.failures, _ = strconv.Atoi(g[3])
			ev.until, _ = time.Parse(time.RFC3339, g[4])
		}
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// checkThrottleEvents: every Event (before `cleared`) names only shards of `pod`; a shard named
// again comes after its backoff ended, one failure further. Returns how many shards were named.
func checkThrottleEvents(c sc, evs []throttleEvent, pod string, on []int, cleared time.Time) int {
	c.Helper()
	owned := map[int]bool{}
	for _, s := range on {
		owned[s] = true
	}
	last := map[int]throttleEvent{}
	var wrong []string
	for _, e := range evs {
		if e.at.After(cleared) {
			continue
		}
		if e.pod == "" {
			wrong = append(wrong, "unreadable note: "+e.note)
			continue
		}
		if e.pod != pod {
			wrong = append(wrong, fmt.Sprintf("names pod %s, not %s: %s", e.pod, pod, e.note))
		}
		for _, s := range e.shards {
			if !owned[s] {
				wrong = append(wrong, fmt.Sprintf("shard %d is not one of %s's: %s", s, pod, e.note))
			}
			if prev, ok := last[s]; ok {
				// Event times are the API server's; allow a little for when they were written.
				if e.at.Before(prev.until.Add(-2 * time.Second)) {
					wrong = append(wrong, fmt.Sprintf("shard %d asked again at %s, within its backoff until %s",
						s, e.at.Format(time.RFC3339), prev.until.Format(time.RFC3339)))
				}
				if e.failures != prev.failures+1 {
					wrong = append(wrong, fmt.Sprintf("shard %d: %d failures after %d", s, e.failures, prev.failures))
				}
			} else if e.failures != throttleLimit {
				wrong = append(wrong, fmt.Sprintf("shard %d first throttled after %d failures, limit %d", s, e.failures, throttleLimit))
			}
			last[s] = e
		}
	}
	if len(wrong) > 0 {
		c.errorf("HandoffThrottled Events break the throttle's rules: %s", strings.Join(head(wrong, 10), "; "))
	}
	return len(last)
}

// operatorMetric sums an operator metric of the counter's ShardMap over the operator replicas
// (only the leader counts; followers show 0 or nothing).
func (s *suite) operatorMetric(c sc, name string) float64 {
	c.Helper()
	_, ops, err := s.operatorDeployment()
	if err != nil {
		c.errorf("operator pods: %v", err)
		return 0
	}
	series := name + `{shard_map="` + s.cfg.counterNS + "/" + s.cfg.counterName + `"}`
	total := 0.0
	for _, p := range ops {
		if p.Status.PodIP == "" {
			continue
		}
		body, err := scrape("http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(operatorAdmin)) + "/metrics")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					total += f
				}
			}
		}
	}
	return total
}

// scrape reads a /metrics page whole.
func scrape(url string) (string, error) {
	client := &http.Client{Timeout: 15 * time.Second}
	res, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, res.Status)
	}
	b, err := io.ReadAll(res.Body)
	return string(b), err
}
