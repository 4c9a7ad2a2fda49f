package operatortest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The manager API takes register, unregister and notify-unhealthy only with the calling pod's own
// projected token (audience kshard.io/operator): the stub pods register with theirs, while calls
// without a token, with a token for another audience (the API server's, or the pod's peer token)
// or with another pod's token are refused, change nothing, and leave a Warning Event on the
// ShardMap.
func TestManagerApiTakesOnlyThePodsOwnToken(t *testing.T) {
	c := clients(t)
	ns := testNamespace(t, c, "op-auth")
	const sm = "counter"
	if _, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Create(bg(), newShardMap(ns, sm, map[string]any{
		"shards": shardCount, "rebalanceInterval": "2s", "pingTimeout": "2s", "handoffTimeout": "5s",
	}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ShardMap: %v", err)
	}
	op := startOperator(t, "op-a", ns, ns)
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(bg(), stubDeployment(sm, sm, "1.0.0", 2, []string{op.manager}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, "the 2 stub pods register with their tokens and share the shards", func() (bool, string) {
		return converged(t, c, ns, sm, 2)
	})
	before, err := getStatus(t, c, ns, sm)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.Clientset.CoreV1().Pods(ns).List(bg(), metav1.ListOptions{LabelSelector: "kshard.io/shard-map=" + sm})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("list the stub pods: %v (%d pods)", err, len(pods.Items))
	}
	a, b := pods.Items[0], pods.Items[1]
	tokenFor := func(pod v1.Pod, audience string) string {
		tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(bg(), "default", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: ptr.To(int64(600)),
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for pod %s: %v", pod.Name, err)
		}
		return tr.Status.Token
	}
	url := func(verb string) string {
		return fmt.Sprintf("http://%s/v1/shardmaps/%s/%s/%s", op.manager, ns, sm, verb)
	}
	unregisterA := fmt.Sprintf(`{"pod":%q,"uid":%q}`, a.Name, a.UID)
	registerA := fmt.Sprintf(`{"pod":%q,"uid":%q,"address":"%s:7101","version":"1.0.0"}`, a.Name, a.UID, a.Status.PodIP)

	cases := []struct {
		what, verb, body, token string
		status                  int
		reason                  string
	}{
		{"unregister without a token", "unregister", unregisterA, "", 401, "no bearer token"},
		{"unregister with a token for the Kubernetes API's audience", "unregister", unregisterA,
			tokenFor(a, "https://kubernetes.default.svc.cluster.local"), 401, ""},
		{"unregister with pod a's token for its peers", "unregister", unregisterA,
			tokenFor(a, "kshard.io/peer/"+ns+"/"+sm), 401, ""},
		{"unregister of pod a with pod b's token", "unregister", unregisterA, tokenFor(b, "kshard.io/operator"), 403, "only itself"},
		{"register of pod a with pod b's token", "register", registerA, tokenFor(b, "kshard.io/operator"), 403, "only itself"},
		{"notify-unhealthy without a token", "notify-unhealthy", fmt.Sprintf(`{"pod":%q}`, a.Name), "", 401, "no bearer token"},
		{"a forged token", "unregister", unregisterA, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", 401, ""},
	}
	for _, tc := range cases {
		status, body := httpPostAs(url(tc.verb), tc.body, tc.token)
		if status != tc.status || !strings.Contains(body, tc.reason) {
			t.Errorf("%s: got %d %s, want %d naming %q", tc.what, status, body, tc.status, tc.reason)
		}
	}
	after, err := getStatus(t, c, ns, sm)
	if err != nil {
		t.Fatal(err)
	}
	if after.Epoch != before.Epoch || len(after.Pods) != 2 {
		t.Errorf("refused calls changed the map: epoch %d -> %d, %d pods registered", before.Epoch, after.Epoch, len(after.Pods))
	}
	// Pod a's own token is accepted: the call goes through (a re-register keeps its shards).
	if status, body := httpPostAs(url("register"), registerA, tokenFor(a, "kshard.io/operator")); status != 200 {
		t.Errorf("register of pod a with its own token: got %d %s, want 200", status, body)
	}
	waitFor(t, 30*time.Second, "Warning Events Unauthenticated and Forbidden on the ShardMap", func() (bool, string) {
		out, err := kubectl(t, "-n", ns, "get", "events", "--field-selector", "type=Warning",
			"-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "Unauthenticated") && strings.Contains(out, "Forbidden"), out
	})
}
