package scenariotest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/scenarios/shardmap"
)

// scenarioInstall (1): run.sh installed the chart and the counter (3 replicas, 300 shards);
// the ShardMap must be Ready and balanced 100/100/100, and `kubectl get shardmaps` must show
// the right columns. It then starts the continuous load every later scenario runs under.
func scenarioInstall(c sc, s *suite) {
	ns := s.cfg.counterNS
	c.waitUntil(3*time.Minute, "the counter Deployment runs 3 ready pods", func() (bool, string) {
		return s.deploymentSettled(3)
	})

	// Shorten the periodic balancing round (see rebalanceInterval).
	ctx, cancel := apiCtx()
	patch := fmt.Sprintf(`{"spec":{"rebalanceInterval":%q}}`, rebalanceInterval)
	_, err := s.dyn.Resource(shardmap.Resource).Namespace(ns).Patch(ctx, s.cfg.counterName, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	cancel()
	if err != nil {
		c.fatalf("setting spec.rebalanceInterval of ShardMap %s/%s: %v", ns, s.cfg.counterName, err)
	}
	c.waitUntil(time.Minute, "the operator observes the ShardMap's new generation", func() (bool, string) {
		m := s.latest()
		return m.Status.ObservedGeneration >= m.Generation,
			fmt.Sprintf("generation %d, observedGeneration %d", m.Generation, m.Status.ObservedGeneration)
	})

	took := c.waitUntil(3*time.Minute, "ShardMap Ready and Balanced with 100 shards on each of 3 pods", func() (bool, string) {
		m := s.latest()
		counts, _ := m.Spread()
		ok := slices.Equal(counts, []int{100, 100, 100}) && m.IsTrue("Ready") && m.IsTrue("Balanced") &&
			m.Status.PodCount == 3 && m.Status.UnassignedCount == 0
		return ok, m.Describe()
	})
	m := s.latest()
	c.r.figure("shards per pod", fmt.Sprint(mustCounts(m)))
	c.r.figure("epoch", m.Status.Epoch)
	c.r.figure("waited for balance after install", secs(took))

	// The registered pods are the Deployment's pods.
	var registered, running []string
	for _, p := range m.Status.Pods {
		registered = append(registered, p.Name)
		if p.Version != "1.0.0" {
			c.errorf("registered pod %s has version %q, want 1.0.0 (label %s)", p.Name, p.Version, versionLabel)
		}
	}
	for _, p := range s.pods.All() {
		running = append(running, p.Name)
	}
	sort.Strings(registered)
	if !slices.Equal(registered, running) {
		c.errorf("registered pods %v are not the Deployment's pods %v", registered, running)
	}
	if m.Status.Manager.Pod == "" || m.Status.Manager.Address == "" {
		c.errorf("status.manager is empty: %+v", m.Status.Manager)
	}

	// What a user sees. LOAD is empty until a periodic round has read the pods' load.
	c.waitUntil(time.Minute, "status.load is written", func() (bool, string) {
		return s.latest().Status.Load != nil, "no status.load yet"
	})
	out, err := kube.RunCommand(30*time.Second, s.cfg.repoRoot, s.cfg.kubectl, "-n", ns, "get", "shardmaps")
	if err != nil {
		c.fatalf("kubectl get shardmaps: %v", err)
	}
	c.logf("kubectl -n %s get shardmaps:\n%s", ns, out)
	if problems := checkGetShardMaps(out, s.cfg.counterName, []string{"300", "3", "0", "True"}); len(problems) > 0 {
		c.errorf("kubectl get shardmaps: %s; output:\n%s", strings.Join(problems, "; "), out)
	}
	if short, err := kube.RunCommand(30*time.Second, s.cfg.repoRoot, s.cfg.kubectl, "-n", ns, "get", "sm", s.cfg.counterName); err != nil {
		c.errorf("kubectl get sm (the short name): %v", err)
	} else if problems := checkGetShardMaps(short, s.cfg.counterName, []string{"300", "3", "0", "True"}); len(problems) > 0 {
		c.errorf("kubectl get sm: %s", strings.Join(problems, "; "))
	}
	c.r.figure("kubectl get shardmaps", strings.Join(strings.Fields(firstLines(out, 1)), " ")+" / "+
		strings.Join(strings.Fields(lineOf(out, s.cfg.counterName)), " "))

	// The continuous load of the whole run starts here.
	start := time.Now()
	s.startContinuous()
	c.waitUntil(time.Minute, "the continuous load gets its first 300 acknowledged replies", func() (bool, string) {
		st := load.Summarize(load.Of(s.rec.Between(start, time.Now()), continuousDriver), 0)
		return st.Acked >= 300, fmt.Sprintf("%d sent, %d acknowledged, %d failed %v", st.Sent, st.Acked, st.Failed, st.FailReasons)
	})
	if st := s.window(c, start, time.Now()); st.Failed > 0 {
		c.errorf("%d of %d requests failed on a balanced, quiet installation", st.Failed, st.Sent)
	}
}

// checkGetShardMaps checks `kubectl get shardmaps` output: the columns and the row of `name`.
func checkGetShardMaps(out, name string, want []string) []string {
	var problems []string
	header, rows := parseTable(out)
	wantHeader := []string{"NAME", "SHARDS", "PODS", "UNASSIGNED", "READY", "LOAD", "AGE"}
	if !slices.Equal(header, wantHeader) {
		problems = append(problems, fmt.Sprintf("columns %v, want %v", header, wantHeader))
	}
	var row []string
	for _, r := range rows {
		if len(r) > 0 && r[0] == name {
			row = r
		}
	}
	if row == nil {
		return append(problems, "no row for "+name)
	}
	if len(row) != len(wantHeader) {
		return append(problems, fmt.Sprintf("row %v does not have %d columns", row, len(wantHeader)))
	}
	for i, w := range want {
		if row[i+1] != w {
			problems = append(problems, fmt.Sprintf("%s is %q, want %q", wantHeader[i+1], row[i+1], w))
		}
	}
	return problems
}

// parseTable splits kubectl's table output into the header and rows of fields.
func parseTable(out string) (header []string, rows [][]string) {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		rows = append(rows, f)
	}
	return header, rows
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func lineOf(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix+" ") {
			return l
		}
	}
	return ""
}

func mustCounts(m *shardmap.ShardMap) []int {
	counts, _ := m.Spread()
	return counts
}

// deploymentSettled: the counter Deployment runs exactly `replicas` up-to-date ready pods.
func (s *suite) deploymentSettled(replicas int32) (bool, string) {
	ctx, cancel := apiCtx()
	defer cancel()
	d, err := s.cs.AppsV1().Deployments(s.cfg.counterNS).Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	return kube.DeploymentSettled(d, s.pods.All(), replicas)
}
