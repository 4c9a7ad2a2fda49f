package securitytest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// victimSecrets are what a tenant must not learn of demo/counter's pods: names, addresses, uids.
func victimSecrets(t *testing.T, c clusterClients) []string {
	t.Helper()
	st, ok := getStatus(t, c, victimNamespace, victimMap)
	if !ok || len(st.Pods) == 0 {
		t.Fatal("demo/counter has no registered pods")
	}
	var out []string
	for _, p := range st.Pods {
		out = append(out, p.Name, p.UID, strings.Split(p.Address, ":")[0])
	}
	return out
}

// Issue 29, low: the operator's /metrics named every tenant's pods (kshard_operator_pod_shards).
func TestTheOperatorsMetricsNameNoTenantsPods(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	secrets := victimSecrets(t, c)
	ops, err := c.Clientset.CoreV1().Pods(kshardNamespace).List(bg(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil || len(ops.Items) == 0 {
		t.Fatalf("the operator pods: %v", err)
	}
	for _, op := range ops.Items {
		status, body := a.send(t, http.MethodGet, "http://"+op.Status.PodIP+":7202/metrics", "", "")
		if status != 200 {
			t.Fatalf("/metrics of %s: %d %s", op.Name, status, body)
		}
		if !strings.Contains(body, "kshard_operator_pods{shard_map=\"demo/counter\"}") &&
			strings.Contains(body, "kshard_operator_leader 1") {
			t.Errorf("the leader %s exports no gauge of demo/counter: is this the right metrics page?", op.Name)
		}
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("/metrics of %s names %q, of another tenant's pod", op.Name, s)
			}
		}
	}
}

// Issue 29, critical: GET .../assignments answered every tenant's pod addresses to anyone.
func TestTheAssignmentsOfAnotherTenantAreNotShown(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	secrets := victimSecrets(t, c)
	url := "http://" + leaderAddress(t, c) + "/v1/shardmaps/" + victimNamespace + "/" + victimMap + "/assignments"
	for file := range attackerAudiences {
		for _, token := range []string{"", file} {
			status, body := a.send(t, http.MethodGet, url, "", token)
			for _, s := range secrets {
				if strings.Contains(body, s) {
					t.Errorf("GET assignments of demo/counter with token %q: %d, and it names %q", token, status, s)
				}
			}
		}
	}
}

// Issue 29, medium: /v1/drain on the admin port trusted the source address, so any hostNetwork
// pod on the node (which sends from the node's address, as this test's host does) drained every
// kshard pod there. It needs the pod's own drain token now, which only its pod spec holds.
func TestNobodyButThePodsOwnHookDrainsIt(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	v := firstVictim(t, c)
	drain := "http://" + v.ip + ":7102/v1/drain"
	for _, from := range []struct {
		what string
		send func() (int, string)
	}{
		{"the node (a hostNetwork pod)", func() (int, string) { return httpDo(t, http.MethodGet, drain, "", "") }},
		{"the node, POST", func() (int, string) { return httpDo(t, http.MethodPost, drain, "", "") }},
		{"the node, a guessed token", func() (int, string) {
			req, _ := http.NewRequest(http.MethodGet, drain, nil)
			req.Header.Set("Kshard-Drain-Token", "0123456789abcdef0123456789abcdef")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode, ""
		}},
		{"another tenant's pod", func() (int, string) { return a.send(t, http.MethodGet, drain, "", "") }},
	} {
		if status, body := from.send(); status != 403 {
			t.Errorf("drain of %s from %s: %d %s, want 403", v.pod, from.what, status, body)
		}
	}
	if status, body := httpDo(t, http.MethodGet, "http://"+v.ip+":7102/readyz", "", ""); status != 200 {
		t.Errorf("%s is not ready after the refused drains: %d %s", v.pod, status, body)
	}
	st, _ := getStatus(t, c, victimNamespace, victimMap)
	found := false
	for _, p := range st.Pods {
		found = found || p.Name == v.pod
	}
	if !found {
		t.Errorf("%s unregistered after the refused drains", v.pod)
	}
}

// Issue 29, low: a pod label made the operator create any number of ShardMaps (and run a
// controller for each). Now only for pods the webhook injected, and at most
// --max-shard-maps-per-namespace (the chart's 20) in a namespace.
func TestPodLabelsCreateABoundedNumberOfShardMaps(t *testing.T) {
	c := clients(t)
	startAttacker(t, c) // its map is one of the namespace's
	const flood, unmarked, limit = 25, 3, 20
	pod := func(name, shardMap string, forged bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kshard.io/shard-map": shardMap}},
			// An image the node does not have: the pod stays an object, which is all the operator sees.
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "idle", Image: "kshard/absent:1"}}}}
		if forged {
			p.Annotations = map[string]string{"kshard.io/injected": "forged", "kshard.io/shards": "1"}
		}
		return p
	}
	var names []string
	for i := 0; i < flood; i++ {
		names = append(names, fmt.Sprintf("flood-%d", i))
		if _, err := c.Clientset.CoreV1().Pods(attackNamespace).Create(bg(), pod(names[i], names[i], true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < unmarked; i++ {
		name := fmt.Sprintf("unmarked-%d", i)
		names = append(names, name)
		if _, err := c.Clientset.CoreV1().Pods(attackNamespace).Create(bg(), pod(name, name, false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = c.Clientset.CoreV1().Pods(attackNamespace).Delete(bg(), n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			_ = c.Dynamic.Resource(shardMapGVR).Namespace(attackNamespace).Delete(bg(), n, metav1.DeleteOptions{})
		}
	})
	// Every pod the operator did not serve is told so on the pod: wait until all of them are.
	refusedWanted := flood + 1 + unmarked - limit // the attacker's own map counts
	waitFor(t, 90*time.Second, "the operator answered every labelled pod", func() (bool, string) {
		events, err := c.Clientset.EventsV1().Events(attackNamespace).List(bg(), metav1.ListOptions{FieldSelector: "reason=ShardMapNotCreated"})
		if err != nil {
			return false, err.Error()
		}
		refused := map[string]bool{}
		for _, e := range events.Items {
			refused[e.Regarding.Name] = true
		}
		maps, err := c.Dynamic.Resource(shardMapGVR).Namespace(attackNamespace).List(bg(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(refused) >= refusedWanted && len(maps.Items) >= limit,
			fmt.Sprintf("%d pods told, %d ShardMaps", len(refused), len(maps.Items))
	})
	maps, err := c.Dynamic.Resource(shardMapGVR).Namespace(attackNamespace).List(bg(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(maps.Items) != limit {
		t.Errorf("%d ShardMaps in %s, want %d (the cap)", len(maps.Items), attackNamespace, limit)
	}
	for i := 0; i < unmarked; i++ {
		name := fmt.Sprintf("unmarked-%d", i)
		if _, err := c.Dynamic.Resource(shardMapGVR).Namespace(attackNamespace).Get(bg(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ShardMap %s was created for a pod the webhook did not inject (%v)", name, err)
		}
	}
}
