package securitytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart's defaults (charts/kshard/values.yaml): the operator's memory limit and its Lease.
const (
	operatorMemoryLimit = 256 << 20
	sidecarMemoryLimit  = 128 << 20
	operatorLease       = 15 * time.Second
	floodFor            = 30 * time.Second
)

type floodResult struct {
	Statuses map[string]int `json:"statuses"`
	Errors   int            `json:"errors"`
	Seconds  float64        `json:"seconds"`
	Held     int            `json:"held"`
	Cut      int            `json:"cut"`
}

// flood is what the attacker's pod sends (its /flood endpoint): `Requests` requests with forged
// tokens, `Concurrency` at once, bodies of `BodyBytes` of `BodyFill` (or `Body`), and `Hold` more
// connections sending a request head a byte a second meanwhile.
type flood struct {
	Method      string `json:"method"`
	URL         string `json:"url"`
	Body        string `json:"body,omitempty"`
	BodyBytes   int    `json:"bodyBytes,omitempty"`
	BodyFill    string `json:"bodyFill,omitempty"`
	Requests    int    `json:"requests"`
	Concurrency int    `json:"concurrency"`
	Insecure    bool   `json:"insecure,omitempty"`
	Hold        int    `json:"hold,omitempty"`
}

func (a attackerPod) flood(f flood) (floodResult, error) {
	req, _ := json.Marshal(struct {
		flood
		Forge bool `json:"forge"`
	}{f, true})
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Post("http://"+a.ip+":8080/flood",
		"application/json", bytes.NewReader(req))
	if err != nil {
		return floodResult{}, err
	}
	defer resp.Body.Close()
	var out floodResult
	if resp.StatusCode != 200 {
		return out, fmt.Errorf("the attacker's flood: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// floodFor sends `f` again and again for floodFor; the results of each round.
func (a attackerPod) floodFor(f flood) ([]floodResult, error) {
	var results []floodResult
	for end := time.Now().Add(floodFor); time.Now().Before(end); {
		r, err := a.flood(f)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// tally sums the rounds: answers by status, connections cut, held connections kept and cut.
func tally(results []floodResult) (statuses map[string]int, unanswered, held, cut int) {
	statuses = map[string]int{}
	for _, r := range results {
		for status, n := range r.Statuses {
			statuses[status] += n
		}
		unanswered += r.Errors
		held += r.Held
		cut += r.Cut
	}
	return statuses, unanswered, held, cut
}

// watched is a process group whose memory is sampled during an attack: a pod's container (by
// its runtime ID), or the whole pod when container is "".
type watched struct {
	name, uid, container string
	limit                int64
}

// duringAttack runs attack, which returns once its flood is over, while it checks twice a second
// that the operator's Lease stays with its holder and is renewed within a Lease duration. It
// fails the test when a watched group went over its limit, and returns their peak RSS by name.
func duringAttack(t *testing.T, c clusterClients, watch []watched, attack func()) map[string]int64 {
	t.Helper()
	lease, err := c.Clientset.CoordinationV1().Leases(kshardNamespace).Get(bg(), "kshard-operator", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || lease.Spec.RenewTime == nil {
		t.Fatalf("the operator's Lease: %v", err)
	}
	holder := *lease.Spec.HolderIdentity
	peaks := map[string]int64{}
	for _, w := range watch {
		if rss := groupRSS(w.uid, w.container); rss < 0 {
			t.Fatalf("no process of %s (uid %s) found in a cgroup .../pod%s/%s", w.name, w.uid, w.uid, w.container)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		attack()
	}()
	lastRenew, lastChange := lease.Spec.RenewTime.Time, time.Now()
	for attacking := true; attacking; {
		select {
		case <-done:
			attacking = false
		case <-time.After(500 * time.Millisecond):
		}
		l, err := c.Clientset.CoordinationV1().Leases(kshardNamespace).Get(bg(), "kshard-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the Lease during the attack: %v", err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			t.Fatalf("the Lease moved from %s during the attack", holder)
		}
		if l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(lastRenew) {
			lastRenew, lastChange = l.Spec.RenewTime.Time, time.Now()
		}
		if since := time.Since(lastChange); since > operatorLease {
			t.Fatalf("the leader %s has not renewed its Lease for %v during the attack", holder, since)
		}
		for _, w := range watch {
			if rss := groupRSS(w.uid, w.container); rss > peaks[w.name] {
				peaks[w.name] = rss
			}
		}
	}
	for _, w := range watch {
		if peaks[w.name] > w.limit {
			t.Errorf("the memory of %s reached %d MiB during the attack, over its limit of %d MiB",
				w.name, peaks[w.name]>>20, w.limit>>20)
		}
	}
	return peaks
}

// leader is the operator pod that holds the Lease.
func leader(t *testing.T, c clusterClients) *v1.Pod {
	t.Helper()
	lease, err := c.Clientset.CoordinationV1().Leases(kshardNamespace).Get(bg(), "kshard-operator", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("the operator's Lease: %v", err)
	}
	p, err := c.Clientset.CoreV1().Pods(kshardNamespace).Get(bg(), *lease.Spec.HolderIdentity, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// groupRSS sums the resident memory of the processes of the pod with that uid, of its container
// with that ID alone when not "" (the kubelet puts a container's processes in the cgroup
// kubepods[/<qos>]/pod<uid>/<container id>); -1 when none is found.
func groupRSS(uid, containerID string) int64 {
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	total, found := int64(0), false
	want := "/pod" + uid + "/" + containerID
	for _, cg := range procs {
		raw, err := os.ReadFile(cg)
		if err != nil || !inCgroup(string(raw), want, containerID == "") {
			continue
		}
		f, err := os.Open(filepath.Join(filepath.Dir(cg), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
				kib, _ := strconv.ParseInt(fields[1], 10, 64)
				total += kib << 10
				found = true
			}
		}
		f.Close()
	}
	if !found {
		return -1
	}
	return total
}

// containerID is the runtime's ID of the pod's running container of that name (its status's
// containerID without the "containerd://").
func containerID(t *testing.T, c clusterClients, ns, pod, name string) string {
	t.Helper()
	p, err := c.Clientset.CoreV1().Pods(ns).Get(bg(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if st.Name == name && st.State.Running != nil {
			if _, id, ok := strings.Cut(st.ContainerID, "://"); ok {
				return id
			}
		}
	}
	t.Fatalf("pod %s/%s has no running container %s", ns, pod, name)
	return ""
}

// inCgroup is true when a /proc/<pid>/cgroup text names a cgroup at `want` (or, with prefix,
// under it).
func inCgroup(text, want string, prefix bool) bool {
	for _, line := range strings.Split(text, "\n") {
		path := line[strings.LastIndex(line, ":")+1:]
		if i := strings.Index(path, want); i >= 0 && (prefix || i+len(want) == len(path)) {
			return true
		}
	}
	return false
}

// Issue 29, high: every call with a bogus token cost the leader a TokenReview through the client
// limiter its Lease renewals shared, and bodies were read before anyone was authenticated: a few
// thousand calls made it miss its renew deadline. Now a token is checked locally first, the Lease
// has a client of its own, and bodies and connections are bounded. While another tenant floods
// the manager API for two Lease durations, the leader keeps the Lease (renewed at least once per
// Lease duration), stays within its memory limit, and demo/counter's map does not change.
func TestTheLeaderKeepsItsLeaseAndItsMemoryUnderAFlood(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	l := leader(t, c)
	before, _ := getStatus(t, c, victimNamespace, victimMap)
	var results []floodResult
	var floodErr error
	peaks := duringAttack(t, c, []watched{{l.Name, string(l.UID), "", operatorMemoryLimit}}, func() {
		results, floodErr = a.floodFor(flood{Method: http.MethodPost,
			URL:      "http://" + l.Status.PodIP + ":7200/v1/shardmaps/" + victimNamespace + "/" + victimMap + "/register",
			Body:     `{"pod":"` + strings.Repeat("x", 15000) + `","uid":"u","address":"10.0.0.1:7101","version":"1"}`,
			Requests: 5000, Concurrency: 48})
	})
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	statuses, unanswered, _, _ := tally(results)
	answered := 0
	for status, n := range statuses {
		answered += n
		if strings.HasPrefix(status, "2") {
			t.Errorf("%d forged register calls were taken (%s)", n, status)
		}
	}
	t.Logf("the flood: %d calls in %v: %d answered (%d of them 401), %d cut at the connection "+
		"(the server's connection caps); the leader's peak RSS %d MiB",
		answered+unanswered, floodFor, answered, statuses["401"], unanswered, peaks[l.Name]>>20)
	if statuses["401"] == 0 {
		t.Errorf("no forged call was answered 401: %+v", results)
	}
	after, _ := getStatus(t, c, victimNamespace, victimMap)
	if after.Epoch != before.Epoch || len(after.Pods) != len(before.Pods) {
		t.Errorf("demo/counter changed during the flood: epoch %d -> %d, %d -> %d pods",
			before.Epoch, after.Epoch, len(before.Pods), len(after.Pods))
	}
}

// Issue 29, high: a sidecar's peer API read a whole body (up to 4 MiB) before it asked who sent
// it, on as many connections as anyone opened: a few dozen bodies at once took a sidecar past its
// 128 MiB; its admin port (probes, metrics, the drain) took 4 MiB bodies from anyone too. Now a
// caller of the peer API is authenticated from its request's head (http::ServerOptions::admit),
// a channel opens only for an authenticated upgrade, and the admin port takes 4 KiB bodies on 64
// connections, 16 from one address. While another tenant sends 4 MiB bodies with forged tokens
// to one of demo/counter's sidecars, 64 at once to the peer API and 32 to the drain, and holds
// 600 more connections that send their heads a byte a second, for two Lease durations: the
// sidecar stays within its memory limit and keeps its shards and its incarnation (no restart).
func TestASidecarKeepsItsMemoryAndItsShardsUnderAFlood(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	v := firstVictim(t, c)
	token := operatorToken(t, c)
	shards := owned(t, v, token)
	var results []floodResult
	var floodErr error
	var admin []floodResult
	var adminErr error
	peaks := duringAttack(t, c, []watched{{v.pod + "/kshard-sidecar", v.uid,
		containerID(t, c, victimNamespace, v.pod, "kshard-sidecar"), sidecarMemoryLimit}}, func() {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			admin, adminErr = a.floodFor(flood{Method: http.MethodPost, URL: "http://" + v.ip + ":7102/v1/drain",
				BodyBytes: 4 << 20, BodyFill: "x", Requests: 1000, Concurrency: 32})
		}()
		results, floodErr = a.floodFor(flood{Method: http.MethodPost,
			URL:       "http://" + v.address + "/v1/peer/entities/counter/flood",
			BodyBytes: 4 << 20, BodyFill: "x", Requests: 2000, Concurrency: 64, Hold: 600})
		wg.Wait()
	})
	if floodErr != nil || adminErr != nil {
		t.Fatal(floodErr, adminErr)
	}
	adminStatuses, adminCut, _, _ := tally(admin)
	for status, n := range adminStatuses {
		if status != "413" {
			t.Errorf("%d drains with 4 MiB bodies were answered %s, not 413", n, status)
		}
	}
	t.Logf("the admin port: %d drains answered 413 from their Content-Length, %d cut at its "+
		"connection caps", adminStatuses["413"], adminCut)
	statuses, unanswered, held, cut := tally(results)
	for status, n := range statuses {
		if status != "401" {
			t.Errorf("%d forged messages were answered %s, not 401", n, status)
		}
	}
	t.Logf("the flood: %d forged 4 MiB messages answered 401 from their heads, %d cut at the "+
		"connection; of the held connections %d lasted and %d were cut; the sidecar's peak RSS "+
		"%d MiB", statuses["401"], unanswered, held, cut, peaks[v.pod+"/kshard-sidecar"]>>20)
	if statuses["401"] == 0 {
		t.Errorf("no forged message was answered 401: %+v", results)
	}
	if now := firstVictim(t, c); now.pod == v.pod && now.incarnation != v.incarnation {
		t.Errorf("%s's sidecar restarted during the flood (incarnation %s -> %s)", v.pod, v.incarnation, now.incarnation)
	}
	if after := owned(t, v, token); after != shards {
		t.Errorf("%s held %q before the flood and %q after", v.pod, shards, after)
	}
}

// Issue 29, high: JSON nested deep enough could take an operator replica's webhook past its
// memory; with both replicas down no annotated pod starts (failurePolicy: Fail). Now bodies are
// bounded (4 MiB), the JSON depth is checked before it is parsed, and 32 connections at most are
// served at once. While another tenant sends 4 MiB of "[" to both replicas' webhooks, 32 at
// once each, for two Lease durations: each replica stays within its memory limit, the leader
// keeps its Lease, and once the flood is over an annotated pod is admitted with its sidecar.
func TestTheWebhookKeepsItsMemoryUnderAFlood(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	ops, err := c.Clientset.CoreV1().Pods(kshardNamespace).List(bg(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil || len(ops.Items) == 0 {
		t.Fatalf("the operator pods: %v", err)
	}
	var watch []watched
	for _, p := range ops.Items {
		watch = append(watch, watched{p.Name, string(p.UID), "", operatorMemoryLimit})
	}
	var mu sync.Mutex
	var results []floodResult
	var floodErr error
	peaks := duringAttack(t, c, watch, func() {
		var wg sync.WaitGroup
		for _, p := range ops.Items {
			wg.Add(1)
			go func(ip string) {
				defer wg.Done()
				r, err := a.floodFor(flood{Method: http.MethodPost,
					URL:       "https://" + ip + ":9443/mutate-pods",
					BodyBytes: 4<<20 - 1024, BodyFill: "[", Requests: 200, Concurrency: 32, Insecure: true})
				mu.Lock()
				defer mu.Unlock()
				results = append(results, r...)
				if err != nil {
					floodErr = err
				}
			}(p.Status.PodIP)
		}
		wg.Wait()
	})
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	statuses, unanswered, _, _ := tally(results)
	for status, n := range statuses {
		if strings.HasPrefix(status, "2") {
			t.Errorf("%d reviews of 4 MiB of nested JSON were answered %s", n, status)
		}
	}
	var peakLog []string
	for _, w := range watch {
		peakLog = append(peakLog, fmt.Sprintf("%s %d MiB", w.name, peaks[w.name]>>20))
	}
	t.Logf("the flood: answers %v, %d cut at the connection; peak RSS %s", statuses, unanswered,
		strings.Join(peakLog, ", "))
	if len(statuses) == 0 {
		t.Errorf("no review was answered at all: %+v", results)
	}
	// A dry run goes through the webhooks (sideEffects: None) and leaves nothing behind.
	var admitted *v1.Pod
	waitFor(t, 30*time.Second, "an annotated pod is admitted after the flood", func() (bool, string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after-the-flood",
			Annotations: map[string]string{"kshard.io/inject": "true", "kshard.io/shard-map": "after-the-flood"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "kshard/absent:1"}}}}
		var err error
		admitted, err = c.Clientset.CoreV1().Pods(attackNamespace).Create(bg(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	injected := false
	for _, ctr := range admitted.Spec.Containers {
		injected = injected || ctr.Name == "kshard-sidecar"
	}
	for _, ctr := range admitted.Spec.InitContainers {
		injected = injected || ctr.Name == "kshard-sidecar"
	}
	if !injected {
		t.Errorf("the pod admitted after the flood has no sidecar: %+v", admitted.Spec)
	}
}
