// Package scenariotest holds kshard's end-to-end scenarios (issue 8) against the local cluster
// (e2e/cluster): the counter example installed through the chart, under continuous traffic, is
// scaled, rolled, crashed, loses its leading operator and its API server, gets bad input, and at
// the end the counter's event log proves that no counter ever ran on two pods at once.
//
// e2e/scenarios/run.sh installs kshard and the counter (e2e/install.sh) and runs TestScenarios:
// the scenarios run in order on one installation, each as a subtest, and a report of what they
// measured goes to e2e/scenarios/report/ (scenarios.json, scenarios.md).
//
// The counter is the C++ example unless run.sh chose another app of e2e/counter-apps.sh (config:
// COUNTER_APP, e.g. the Go counter of examples/go-counter); for those, run.sh runs a subset of
// the scenarios with go test -run, and the report lists the others as skipped.
package scenariotest

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

const (
	versionLabel  = "app.kubernetes.io/version"
	shardCount    = 300
	publicPort    = 8081
	peerPort      = 7101
	sidecarAdmin  = 7102
	managerPort   = 7200
	operatorAdmin = 7202
	webhookPort   = 9443
	leaseName     = "kshard-operator"
	leaseDuration = 15 * time.Second
	// The scenarios shorten the periodic balancing round (default 20 s) so that a scale-up or a
	// replaced pod is balanced in about a minute instead of several; nothing else is changed.
	rebalanceInterval = "5s"
	// The continuous driver: one entity per shard, incremented all along the run.
	continuousDriver = "continuous"
	continuousRate   = 60
	// Request timeout of the drivers: longer than the ShardMap's sendTimeout (10 s), so a
	// request the sidecar still retries is never abandoned.
	requestTimeout = 30 * time.Second
)

// suite is the state the scenarios share: one installation, watchers, the continuous driver.
type suite struct {
	cfg   config
	cs    *kubernetes.Clientset
	dyn   dynamic.Interface
	pods  *kube.PodWatcher
	maps  *kube.MapWatcher
	rec   *load.Recorder
	runID string
	// continuous is driven from the first scenario to the last; traffic by scenario 2.
	continuous []*load.Entity
	traffic    []*load.Entity
	skewed     []*load.Entity // by scenario skewed-load
	driver     *load.Driver
	client     *load.Client

	stopCh  chan struct{}
	started time.Time

	mu sync.Mutex
	// deaths: when processes of a pod were killed (the event log check closes its intervals).
	deaths map[string][]time.Time
}

func (s *suite) history() *shardmap.History { return s.maps.History() }

// latest is the newest version of the counter's ShardMap; an empty one before any was seen.
func (s *suite) latest() *shardmap.ShardMap {
	if m := s.maps.History().Latest(); m != nil {
		return m
	}
	return &shardmap.ShardMap{Name: "(no ShardMap seen yet)"}
}

// getMap reads the counter's ShardMap from the API server (not from the watch).
func (s *suite) getMap() (*shardmap.ShardMap, error) {
	ctx, cancel := apiCtx()
	defer cancel()
	u, err := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return shardmap.FromUnstructured(u)
}

func (s *suite) recordDeath(pod string, at time.Time) {
	s.mu.Lock()
	s.deaths[pod] = append(s.deaths[pod], at)
	s.mu.Unlock()
}

// deathTimes is a copy of the deaths recorded so far, for the event log's checks.
func (s *suite) deathTimes() map[string][]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]time.Time{}
	for pod, ts := range s.deaths {
		out[pod] = append([]time.Time(nil), ts...)
	}
	return out
}

type scenario struct {
	name, title string
	run         func(c sc, s *suite)
}

func scenarios() []scenario {
	return []scenario{
		{"install", "Install: Ready and balanced 100/100/100", scenarioInstall},
		{"traffic", "Traffic: 1,000 entities × 20 increments", scenarioTraffic},
		{"scale", "Scale 3 → 6 → 2 under traffic", scenarioScale},
		{"rolling-update", "Rolling update 1.0.0 → 1.1.0 under traffic", scenarioRollingUpdate},
		{"crash", "Crash: a pod's processes killed, the pod gone", scenarioCrash},
		{"leader-failover", "Leader failover of the operator", scenarioLeaderFailover},
		{"apiserver-outage", "API server outage of 30 s", scenarioAPIServerOutage},
		{"bad-input", "Bad input to the API, sidecar, manager and webhook", scenarioBadInput},
		{"skewed-load", "Skewed load: Zipf traffic on one pod's shards, balanced by load", scenarioSkewedLoad},
		{"topics", "Topics: each publication reaches every pod of the map once", scenarioTopics},
		{"bounded-entities", "Bounded active entities: a flood of new ids under maxActiveEntitiesPerPod 20", scenarioBoundedEntities},
		{"handoff-throttle", "Handoff throttle: a pod whose stops fail is left alone, the rest balances", scenarioHandoffThrottle},
		{"remembered-entities", "Remembered entities: back on their shard's owner after a kill and a scale, without a message", scenarioRemembered},
		{"singleton", "Singleton: its pod killed, it runs elsewhere, never on two pods", scenarioSingleton},
		{"single-owner", "Single owner over the whole run", scenarioSingleOwner},
	}
}

func TestScenarios(t *testing.T) {
	cfg := loadConfig()
	if cfg.kubeconfig == "" {
		t.Skip("KUBECONFIG is not set: run the scenarios through e2e/scenarios/run.sh")
	}
	command := "bash e2e/scenarios/run.sh"
	if cfg.counterApp != "cpp" {
		command += " --app " + cfg.counterApp
	}
	rep := &Report{Started: time.Now(), Command: command, Commit: cfg.commit,
		Settings: []Figure{
			{"app", fmt.Sprintf("%s: %s/%s, image %s", cfg.counterApp, cfg.counterNS, cfg.counterName, cfg.counterImage)},
			{"counter", fmt.Sprintf("%d shards, 3 replicas, chart defaults", shardCount)},
			{"spec.rebalanceInterval", rebalanceInterval + " (set by the scenarios; default 20s)"},
			{"continuous load", fmt.Sprintf("%d entities (one per shard), %d increments/s in all", shardCount, continuousRate)},
		}}
	if cfg.installSeconds != "" {
		rep.Settings = append(rep.Settings, Figure{"install (helm install + counter Ready and Balanced, by run.sh)", cfg.installSeconds + " s"})
	}
	all := scenarios()
	for i, sn := range all {
		rep.Scenarios = append(rep.Scenarios, &ScenarioReport{Number: i + 1, Name: sn.name, Title: sn.title, Status: "skipped"})
	}
	defer func() {
		rep.finish(time.Now())
		if err := rep.write(cfg.reportDir); err != nil {
			t.Errorf("writing the report to %s: %v", cfg.reportDir, err)
		} else {
			t.Logf("report: %s/scenarios.md and scenarios.json", cfg.reportDir)
		}
	}()

	s, err := newSuite(cfg)
	if err != nil {
		rep.Scenarios[0].Status = "failed"
		rep.Scenarios[0].Failures = []string{err.Error()}
		t.Fatal(err)
	}
	defer s.stop()

	for i, sn := range all {
		r := rep.Scenarios[i]
		r.start = time.Now()
		ran := false
		ok := t.Run(sn.name, func(t *testing.T) { ran = true; sn.run(sc{T: t, r: r}, s) })
		if !ran { // left out by go test -run: its report stays "skipped"
			continue
		}
		r.Seconds = round(time.Since(r.start).Seconds(), 1)
		r.Status = "passed"
		if !ok {
			r.Status = "failed"
		}
		if !ok && sn.name == "install" {
			t.Log("the installation is not usable: the other scenarios are skipped")
			break
		}
	}
}

func newSuite(cfg config) (*suite, error) {
	cs, dyn, err := kube.NewClients(cfg.kubeconfig)
	if err != nil {
		return nil, err
	}
	s := &suite{cfg: cfg, cs: cs, dyn: dyn, rec: &load.Recorder{}, deaths: map[string][]time.Time{}, started: time.Now(),
		runID:  fmt.Sprintf("e2e%d", time.Now().Unix()%1000000),
		client: load.NewClient(publicPort, 3*time.Second)}
	s.stopCh = make(chan struct{})
	if s.pods, err = kube.WatchPods(cs, cfg.counterNS, cfg.counterLabels(), s.stopCh); err != nil {
		return nil, err
	}
	if s.maps, err = kube.WatchShardMap(dyn, cfg.counterNS, cfg.counterName, s.stopCh); err != nil {
		return nil, err
	}
	// Counter ids carry the run's id: the counters' state (a hostPath) outlives runs.
	s.continuous = load.CoveringEntities(s.runID+"-c", shardCount, 1)
	s.traffic = numberedEntities(s.runID+"-t", 1000, shardCount)
	return s, nil
}

func (s *suite) stop() {
	if s.driver != nil {
		s.driver.Stop()
	}
	close(s.stopCh)
}

// startContinuous starts the continuous driver once (the first scenario that needs it).
func (s *suite) startContinuous() {
	if s.driver != nil {
		return
	}
	s.driver = load.Start(load.Config{Name: continuousDriver, Entities: s.continuous, Rate: continuousRate,
		Pods: s.pods, Recorder: s.rec, Port: publicPort, Timeout: requestTimeout})
}

// window summarises the requests in flight during [from, to] for the report, per driver.
func (s *suite) window(c sc, from, to time.Time, drivers ...string) load.Stats {
	if len(drivers) == 0 {
		drivers = []string{continuousDriver}
	}
	var total load.Stats
	for _, d := range drivers {
		st := load.Summarize(load.Of(s.rec.Overlapping(from, to), d), to.Sub(from))
		c.r.requests(d, st)
		total.Sent += st.Sent
		total.Failed += st.Failed
		total.Acked += st.Acked
	}
	return total
}

// requireEnvFile fails when a file the scenarios need is missing.
func requireFile(c sc, path, why string) {
	c.Helper()
	if _, err := os.Stat(path); err != nil {
		c.fatalf("%s: %v", why, err)
	}
}
