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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart's defaults (charts/kshard/values.yaml): the operator's memory limit and its Lease.
const (
	operatorMemoryLimit = 256 << 20
	operatorLease       = 15 * time.Second
	floodFor            = 30 * time.Second
)

type floodResult struct {
	Statuses map[string]int `json:"statuses"`
	Errors   int            `json:"errors"`
	Seconds  float64        `json:"seconds"`
}

// flood has the attacker's pod send `requests` requests with forged tokens, `concurrency` at once.
func (a attackerPod) flood(t *testing.T, method, url, body string, requests, concurrency int) (floodResult, error) {
	req, _ := json.Marshal(map[string]any{"method": method, "url": url, "body": body,
		"requests": requests, "concurrency": concurrency, "forge": true})
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

// podRSS sums the resident memory of the processes of the pod with that uid (the local cluster
// runs each container in the cgroup kshard/pod-<uid>/<container>); -1 when none is found.
func podRSS(uid string) int64 {
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	total, found := int64(0), false
	for _, cg := range procs {
		raw, err := os.ReadFile(cg)
		if err != nil || !strings.Contains(string(raw), "/pod-"+uid+"/") {
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

// Issue 29, high: every call with a bogus token cost the leader a TokenReview through the client
// limiter its Lease renewals shared, and bodies were read before anyone was authenticated: a few
// thousand calls made it miss its renew deadline. Now a token is checked locally first, the Lease
// has a client of its own, and bodies and connections are bounded. While another tenant floods
// the manager API for two Lease durations, the leader keeps the Lease (renewed at least once per
// Lease duration), stays within its memory limit, and demo/counter's map does not change.
func TestTheLeaderKeepsItsLeaseAndItsMemoryUnderAFlood(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	lease, err := c.cs.CoordinationV1().Leases(kshardNamespace).Get(bg(), "kshard-operator", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || lease.Spec.RenewTime == nil {
		t.Fatalf("the operator's Lease: %v", err)
	}
	holder := *lease.Spec.HolderIdentity
	leader, err := c.cs.CoreV1().Pods(kshardNamespace).Get(bg(), holder, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(leader.UID)
	if rss := podRSS(uid); rss < 0 {
		t.Fatalf("no process of the leader %s (uid %s) found in a cgroup .../pod-%s/", holder, uid, uid)
	}
	before, _ := getStatus(t, c, victimNamespace, victimMap)

	url := "http://" + leader.Status.PodIP + ":7200/v1/shardmaps/" + victimNamespace + "/" + victimMap + "/register"
	body := `{"pod":"` + strings.Repeat("x", 15000) + `","uid":"u","address":"10.0.0.1:7101","version":"1"}`
	var (
		mu       sync.Mutex
		results  []floodResult
		floodErr error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for end := time.Now().Add(floodFor); time.Now().Before(end); {
			r, err := a.flood(t, http.MethodPost, url, body, 5000, 48)
			mu.Lock()
			if err != nil {
				floodErr = err
			} else {
				results = append(results, r)
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()

	lastRenew, lastChange := lease.Spec.RenewTime.Time, time.Now()
	peakRSS := int64(0)
	for flooding := true; flooding; {
		select {
		case <-done:
			flooding = false
		case <-time.After(500 * time.Millisecond):
		}
		l, err := c.cs.CoordinationV1().Leases(kshardNamespace).Get(bg(), "kshard-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the Lease during the flood: %v", err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			t.Fatalf("the Lease moved from %s during the flood", holder)
		}
		if l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(lastRenew) {
			lastRenew, lastChange = l.Spec.RenewTime.Time, time.Now()
		}
		if since := time.Since(lastChange); since > operatorLease {
			t.Fatalf("the leader %s has not renewed its Lease for %v during the flood", holder, since)
		}
		if rss := podRSS(uid); rss > peakRSS {
			peakRSS = rss
		}
	}
	if peakRSS > operatorMemoryLimit {
		t.Errorf("the leader's memory reached %d MiB during the flood, over its limit of %d MiB",
			peakRSS>>20, operatorMemoryLimit>>20)
	}
	mu.Lock()
	defer mu.Unlock()
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	answered, refused, unanswered := 0, 0, 0
	for _, r := range results {
		for status, n := range r.Statuses {
			answered += n
			if status == "401" {
				refused += n
			} else if strings.HasPrefix(status, "2") {
				t.Errorf("%d forged register calls were taken (%s)", n, status)
			}
		}
		unanswered += r.Errors
	}
	t.Logf("the flood: %d calls in %v: %d answered (%d of them 401), %d cut at the connection "+
		"(the server's connection caps); the leader's peak RSS %d MiB",
		answered+unanswered, floodFor, answered, refused, unanswered, peakRSS>>20)
	if refused == 0 {
		t.Errorf("no forged call was answered 401: %+v", results)
	}
	after, _ := getStatus(t, c, victimNamespace, victimMap)
	if after.Epoch != before.Epoch || len(after.Pods) != len(before.Pods) {
		t.Errorf("demo/counter changed during the flood: epoch %d -> %d, %d -> %d pods",
			before.Epoch, after.Epoch, len(before.Pods), len(after.Pods))
	}
}
