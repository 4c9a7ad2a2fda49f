package runner

import (
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/nemesis/schedule"
	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/support/wait"
)

// Deadlines of the run's own waits.
const (
	startDeadline    = 6 * time.Minute // the installation settled before the first fault
	recoveryDeadline = 3 * time.Minute // every shard answering after a step
	settleDeadline   = 8 * time.Minute // the system settled after the last fault
	finalReadTime    = 3 * time.Minute // every counter read at the end
	probeParallel    = 16
)

// run is one run of the nemesis: the schedule, what the faults hold, what they did.
type run struct {
	*env
	sched schedule.Schedule
	rep   *Report

	mu sync.Mutex
	// busy: the pods a running fault holds, so that the step's other fault hits another.
	busy map[string]bool
	// releases: when each force-deleted pod's processes were released (killed), by pod name.
	releases map[string][]time.Time
	// version: the pod template's version label; versions: how many new ones rollouts made.
	version  string
	versions int
	// probes: one counter per shard, read to see every shard answer.
	probes []*load.Entity
}

// Run runs the nemesis with cfg and returns its report (also when the run broke off: err says
// why; the report says what was done until then).
func Run(cfg Config) (*Report, error) {
	sched := schedule.Generate(cfg.Seed, cfg.Duration)
	logf("seed %d; replay with: %s", cfg.Seed, cfg.Replay)
	fmt.Fprint(os.Stderr, sched.String())
	rep := newReport(cfg, sched)
	e, err := newEnv(cfg)
	if err != nil {
		return rep, err
	}
	defer e.close()
	rep.RunID = e.runID
	r := &run{env: e, sched: sched, rep: rep, busy: map[string]bool{}, releases: map[string][]time.Time{}}
	if err := r.begin(); err != nil {
		return rep, err
	}
	restore, err := e.rememberCounters()
	if err != nil {
		return rep, err
	}
	defer func() {
		if err := e.patchMap(restore); err != nil {
			rep.problem("restoring the ShardMap's remembered types: %v", err)
		}
	}()
	counters := load.CoveringEntities(e.runID+"-c", shardCount, cfg.PerShard)
	r.probes, _ = load.OneEntityPerShard(counters, shardRange())
	logf("load: %d counters (%d per shard), %.0f requests/s, %.0f%% reads", len(counters), cfg.PerShard, cfg.Rate, readShare*100)
	g := startLoad(e, counters, cfg.Rate)
	if _, unread := r.everyShardAnswers(); len(unread) > 0 {
		rep.problem("before the first fault, %d shards did not answer within %s (e.g. %v)", len(unread), recoveryDeadline, head(unread, 5))
	}
	r.faults()
	r.healAll()
	r.settle()
	logf("quiet period of %s under load", cfg.Quiet)
	time.Sleep(cfg.Quiet)
	g.stop()
	logf("load stopped; reading every counter")
	finals, unread := e.readEach(counters, probeParallel, time.Now().Add(finalReadTime), "final")
	r.check(finals, unread)
	rep.finish(e.rec.Ops())
	return rep, nil
}

func shardRange() []int {
	out := make([]int, shardCount)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// begin waits until the installation is settled and notes its version.
func (r *run) begin() error {
	ctx, cancel := kube.Ctx()
	d, err := r.cs.AppsV1().Deployments(r.cfg.CounterNS).Get(ctx, r.cfg.CounterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		return fmt.Errorf("the counter Deployment: %w", err)
	}
	r.version = d.Spec.Template.Labels[versionLabel]
	if r.version == "" {
		r.version = initialVersion
	}
	took, err := wait.Until(startDeadline, 500*time.Millisecond, r.settled)
	if err != nil {
		return fmt.Errorf("the counter did not settle before the faults (%d pods, Ready and balanced): %w", schedule.BaseReplicas, err)
	}
	logf("the counter is settled (waited %s): %s", secs(took), r.maps.History().Latest().Describe())
	return nil
}

// settled: BaseReplicas serving pods of the current version, all registered, and the ShardMap
// Ready and balanced over them.
func (r *run) settled() (bool, string) {
	if ok, msg := r.podsOn(r.version, schedule.BaseReplicas); !ok {
		return false, msg
	}
	m := r.maps.History().Latest()
	if ok, msg := m.Balanced(schedule.BaseReplicas); !ok || !m.IsTrue("Ready") {
		return false, "ShardMap not Ready and balanced: " + msg
	}
	return true, ""
}

// faults runs the schedule's steps until its duration is over (a step under way finishes).
func (r *run) faults() {
	r.rep.FaultsStarted = time.Now()
	deadline := r.rep.FaultsStarted.Add(r.cfg.Duration)
	for i, st := range r.sched.Steps {
		if time.Now().After(deadline) {
			break
		}
		r.step(i+1, st)
		r.rep.StepsRun = i + 1
		time.Sleep(st.Gap)
	}
	r.rep.FaultsEnded = time.Now()
	logf("faults over: %d of %d steps in %s", r.rep.StepsRun, len(r.sched.Steps), secs(r.rep.FaultsEnded.Sub(r.rep.FaultsStarted)))
}

// step runs a step's faults (the second one from its offset on) until each is healed, then
// measures how long until every shard answers again.
func (r *run) step(n int, st schedule.Step) {
	recs := make([]*FaultRecord, len(st.Faults))
	r.newStep()
	start := time.Now()
	var wg sync.WaitGroup
	for i, f := range st.Faults {
		rec := &FaultRecord{Step: n, Kind: f.Kind, Plan: f.String(), Overlapping: len(st.Faults) > 1}
		recs[i] = rec
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(f.Offset)))
			logf("step %d: %s", n, f)
			r.inject(f, rec)
			if rec.Injected.IsZero() {
				logf("step %d: %s not injected: %s", n, f.Kind, rec.Error)
				return
			}
			logf("step %d: %s on %s: injected %s, healed %s later%s", n, f.Kind, rec.Target, clock(rec.Injected),
				secs(rec.Healed.Sub(rec.Injected)), errorSuffix(rec.Error))
		}()
	}
	wg.Wait()
	r.rep.Faults = append(r.rep.Faults, recs...)
	recovered, unread := r.everyShardAnswers()
	healed := latestHeal(recs)
	for _, rec := range recs {
		if !rec.Healed.IsZero() && len(unread) == 0 {
			rec.Recovered, rec.StepHealed = recovered, healed
		}
	}
	if len(unread) > 0 {
		logf("step %d: %d shards still did not answer %s after the heal (e.g. %v)", n, len(unread), recoveryDeadline, head(unread, 5))
		return
	}
	logf("step %d: every shard answers, %s after the last heal", n, secs(recovered.Sub(healed)))
}

func latestHeal(recs []*FaultRecord) time.Time {
	var t time.Time
	for _, rec := range recs {
		if rec.Healed.After(t) {
			t = rec.Healed
		}
	}
	return t
}

func errorSuffix(err string) string {
	if err == "" {
		return ""
	}
	return "; " + err
}

// everyShardAnswers reads one counter of each shard until each has answered once; it returns
// when the last one did, and the counters that had not within recoveryDeadline.
func (r *run) everyShardAnswers() (time.Time, []string) {
	_, unread := r.readEach(r.probes, probeParallel, time.Now().Add(recoveryDeadline), "probe")
	return time.Now(), unread
}

// healAll undoes whatever a fault left behind (it should be nothing: each fault heals itself;
// anything found is a problem of the run): frozen containers, partitions, orphans, a stopped API
// server, another size of the Deployment.
func (r *run) healAll() {
	pods, err := r.node.Pods()
	if err != nil {
		r.rep.problem("listing the node's pods to heal them: %v", err)
	}
	for _, p := range pods {
		if p.Namespace != r.cfg.CounterNS {
			continue
		}
		for _, c := range []string{appContainer, sidecarName} {
			if frozen, _ := p.Frozen(c); frozen {
				r.rep.problem("%s: container %s was left frozen: %v", p, c, p.Thaw(c))
			}
		}
		if rules, _ := p.Partitions(); len(rules) > 0 {
			r.rep.problem("%s was left partitioned (%v): %v", p, rules, p.Heal())
		}
		if p.Orphaned() {
			err := p.Release()
			r.rep.problem("%s was left orphaned: released, %v", p, err)
			if err == nil {
				r.releases[p.Name] = append(r.releases[p.Name], time.Now())
			}
		}
	}
	if err := r.script(3*time.Minute, "apiserver.sh", "start"); err != nil {
		r.rep.problem("starting the API server after the faults: %v", err)
	}
}

// settle waits until the system is settled again and every shard answers.
func (r *run) settle() {
	logf("every fault healed; waiting for the counter to settle")
	took, err := wait.Until(settleDeadline, time.Second, r.settled)
	if err != nil {
		r.rep.problem("the counter did not settle after the faults (%d pods of %s, registered, Ready and balanced): %v",
			schedule.BaseReplicas, r.version, err)
		if err := r.scale(schedule.BaseReplicas); err != nil {
			r.rep.problem("%v", err)
		}
	}
	r.rep.SettledAfter = took.Seconds()
	at, unread := r.everyShardAnswers()
	if len(unread) > 0 {
		r.rep.problem("after the faults and settling, %d shards did not answer within %s (e.g. %v)", len(unread), recoveryDeadline, head(unread, 5))
		return
	}
	logf("settled after %s; every shard answers (%s)", secs(took), clock(at))
}

func head[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
