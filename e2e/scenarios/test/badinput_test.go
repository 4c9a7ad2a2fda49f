package scenariotest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kshard.local/e2e/scenarios/shardid"
	"kshard.local/e2e/scenarios/shardmap"
	"kshard.local/e2e/support/wait"
)

// scenarioBadInput (8): invalid ShardMaps are refused by the API with a message naming the
// field; malformed requests to the sidecar's peer API (and to its app API, through the
// counter), to the operator's manager API and to the webhook (directly, and through the API
// as pods with bad annotations) get 4xx answers; and every process stays up.
func scenarioBadInput(c sc, s *suite) {
	s.waitSteady(c, 3)
	s.waitOperators(c, 2*time.Minute)
	start := time.Now()
	before := s.processes(c)
	checked := 0

	checked += s.badShardMaps(c)
	checked += s.badSidecarRequests(c)
	checked += s.badManagerRequests(c)
	checked += s.badWebhookRequests(c)
	c.r.figure("malformed inputs refused", checked)

	// Every process is still the same and answers its health check.
	after := s.processes(c)
	for key, restarts := range before {
		if now, ok := after[key]; !ok {
			c.errorf("container %s is gone after the bad input", key)
		} else if now != restarts {
			c.errorf("container %s restarted during the bad input (%d → %d restarts)", key, restarts, now)
		}
	}
	healthy := 0
	for _, p := range s.pods.All() {
		healthy += s.expectHealthy(c, "sidecar of "+p.Name, fmt.Sprintf("http://%s/healthz", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(sidecarAdmin))))
	}
	if _, ops, err := s.operatorDeployment(); err != nil {
		c.errorf("operator pods: %v", err)
	} else {
		for _, p := range ops {
			healthy += s.expectHealthy(c, "operator "+p.Name, fmt.Sprintf("http://%s/healthz", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(operatorAdmin))))
		}
	}
	c.r.figure("processes up afterwards (same containers, no restart, /healthz 200)", fmt.Sprintf("%d containers, %d health checks", len(after), healthy))
	st := s.window(c, start, time.Now())
	c.r.figure("failed requests", st.Failed)
	if st.Failed > 0 {
		c.errorf("%d of %d requests failed during the bad input (want 0): %v", st.Failed, st.Sent, c.r.Requests[continuousDriver].FailReasons)
	}
}

// processes maps namespace/pod(uid)/container to its restart count, for the counter's and the
// operator's pods.
func (s *suite) processes(c sc) map[string]int32 {
	c.Helper()
	out := map[string]int32{}
	for _, ns := range []string{s.cfg.counterNS, s.cfg.kshardNS} {
		ctx, cancel := apiCtx()
		pods, err := s.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			c.fatalf("listing pods of %s: %v", ns, err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase != v1.PodRunning {
				continue
			}
			for _, st := range append(append([]v1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				out[fmt.Sprintf("%s/%s(%s)/%s", ns, p.Name, p.UID, st.Name)] = st.RestartCount
			}
		}
	}
	return out
}

func (s *suite) expectHealthy(c sc, what, url string) int {
	c.Helper()
	code, body, err := httpDo(http.MethodGet, url, nil, nil)
	if err != nil || code != http.StatusOK {
		c.errorf("%s: GET %s: %d %s %v", what, url, code, body, err)
		return 0
	}
	return 1
}

// expect4xx sends a request and fails the scenario unless the answer is a 4xx.
func expect4xx(c sc, what, method, url string, headers map[string]string, body []byte) int {
	c.Helper()
	code, reply, err := httpDo(method, url, headers, body)
	if err != nil {
		c.errorf("%s: %s %s: no answer: %v", what, method, url, err)
		return 0
	}
	if code < 400 || code > 499 {
		c.errorf("%s: %s %s answered %d %s, want 4xx", what, method, url, code, truncate(reply, 200))
		return 0
	}
	c.logf("%s: %d %s", what, code, truncate(reply, 160))
	return 1
}

// expectValidationRefusal is expect4xx for a request with valid credentials: the refusal must be
// the request's own (400, 404, 405, 413, 422), not 401 or 403 from the authentication.
func expectValidationRefusal(c sc, what, method, url string, headers map[string]string, body []byte) int {
	c.Helper()
	code, reply, err := httpDo(method, url, headers, body)
	switch {
	case err != nil:
		c.errorf("%s: %s %s: no answer: %v", what, method, url, err)
		return 0
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		c.errorf("%s: %s %s answered %d %s: the credentials were refused, so the request itself was not checked", what, method, url, code, truncate(reply, 200))
		return 0
	case code < 400 || code > 499:
		c.errorf("%s: %s %s answered %d %s, want 4xx", what, method, url, code, truncate(reply, 200))
		return 0
	}
	c.logf("%s: %d %s", what, code, truncate(reply, 160))
	return 1
}

// expectStatus sends a request and fails the scenario unless the answer has status want.
func expectStatus(c sc, what, method, url string, headers map[string]string, body []byte, want int) int {
	c.Helper()
	code, reply, err := httpDo(method, url, headers, body)
	if err != nil || code != want {
		c.errorf("%s: %s %s answered %d %s (%v), want %d", what, method, url, code, truncate(reply, 200), err, want)
		return 0
	}
	c.logf("%s: %d %s", what, code, truncate(reply, 160))
	return 1
}

func withBearer(headers map[string]string, token string) map[string]string {
	out := map[string]string{"Authorization": "Bearer " + token}
	for k, v := range headers {
		out[k] = v
	}
	return out
}

// peerTokens returns tokens of the operator's ServiceAccount (audience
// kshard.io/sidecar/<ns>/counter, as the operator mints it) and of the counter pod's (audience
// kshard.io/peer/<ns>/counter, bound to that pod): what the operator and a registered sidecar
// send on the peer API.
func (s *suite) peerTokens(c sc, podName string) (operator, pod string) {
	c.Helper()
	d, _, err := s.operatorDeployment()
	if err != nil {
		c.fatalf("the operator's Deployment: %v", err)
	}
	var p *v1.Pod
	for _, q := range s.pods.All() {
		if q.Name == podName {
			p = q
		}
	}
	if p == nil {
		c.fatalf("counter pod %s is gone", podName)
	}
	operator = s.token(c, s.cfg.kshardNS, serviceAccountOf(&d.Spec.Template.Spec),
		"kshard.io/sidecar/"+s.cfg.counterNS+"/"+s.cfg.counterName, nil)
	pod = s.token(c, s.cfg.counterNS, serviceAccountOf(&p.Spec),
		"kshard.io/peer/"+s.cfg.counterNS+"/"+s.cfg.counterName,
		&authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID})
	return operator, pod
}

func serviceAccountOf(spec *v1.PodSpec) string {
	if spec.ServiceAccountName == "" {
		return "default"
	}
	return spec.ServiceAccountName
}

func (s *suite) token(c sc, ns, serviceAccount, audience string, bound *authv1.BoundObjectReference) string {
	c.Helper()
	seconds := int64(600)
	ctx, cancel := apiCtx()
	defer cancel()
	tr, err := s.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, serviceAccount, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: &seconds, BoundObjectRef: bound}}, metav1.CreateOptions{})
	if err != nil {
		c.fatalf("a token of %s/%s: %v", ns, serviceAccount, err)
	}
	return tr.Status.Token
}

func httpDo(method, url string, headers map[string]string, body []byte) (int, string, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		// The webhook's certificate names its Service, not the pod IP dialled here.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test client, see above
	}}
	res, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, string(b), nil
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// badShardMaps: invalid specs are refused (dry-run creates and an update of spec.shards).
func (s *suite) badShardMaps(c sc) int {
	c.Helper()
	cases := []struct {
		what  string
		spec  map[string]any
		field string
	}{
		{"shards 0", map[string]any{"shards": 0}, "spec.shards"},
		{"shards above 100000", map[string]any{"shards": 100001}, "spec.shards"},
		{"shards not a number", map[string]any{"shards": "many"}, "spec.shards"},
		{"rebalanceInterval malformed", map[string]any{"shards": 10, "rebalanceInterval": "soon"}, "spec.rebalanceInterval"},
		{"rebalanceInterval zero", map[string]any{"shards": 10, "rebalanceInterval": "0s"}, "spec.rebalanceInterval"},
		{"rebalanceRetryInterval zero", map[string]any{"shards": 10, "rebalanceRetryInterval": "0"}, "spec.rebalanceRetryInterval"},
		{"rebalanceRate above 1", map[string]any{"shards": 10, "rebalanceRate": 1.5}, "spec.rebalanceRate"},
		{"rebalanceRate zero", map[string]any{"shards": 10, "rebalanceRate": 0}, "spec.rebalanceRate"},
		{"pingTimeout negative", map[string]any{"shards": 10, "pingTimeout": "-1s"}, "spec.pingTimeout"},
		{"handoffTimeout zero", map[string]any{"shards": 10, "handoffTimeout": "0s"}, "spec.handoffTimeout"},
		{"sendTimeout without unit", map[string]any{"shards": 10, "sendTimeout": "10"}, "spec.sendTimeout"},
		{"entityIdleTimeout malformed", map[string]any{"shards": 10, "entityIdleTimeout": "a minute"}, "spec.entityIdleTimeout"},
		{"versionLabel empty", map[string]any{"shards": 10, "versionLabel": ""}, "spec.versionLabel"},
		{"maxActiveEntitiesPerPod negative", map[string]any{"shards": 10, "maxActiveEntitiesPerPod": -1}, "spec.maxActiveEntitiesPerPod"},
		{"no spec", nil, "spec"},
	}
	res := s.dyn.Resource(shardmap.Resource).Namespace(s.cfg.counterNS)
	n := 0
	for i, tc := range cases {
		obj := map[string]any{
			"apiVersion": "kshard.io/v1alpha1", "kind": "ShardMap",
			"metadata": map[string]any{"name": fmt.Sprintf("e2e-invalid-%d", i)},
		}
		if tc.spec != nil {
			obj["spec"] = tc.spec
		}
		ctx, cancel := apiCtx()
		_, err := res.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		cancel()
		n += expectInvalid(c, "ShardMap with "+tc.what, err, tc.field)
	}
	// spec.shards is immutable.
	ctx, cancel := apiCtx()
	u, err := res.Get(ctx, s.cfg.counterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		c.errorf("getting ShardMap %s: %v", s.cfg.counterName, err)
		return n
	}
	if err := unstructured.SetNestedField(u.Object, int64(shardCount+1), "spec", "shards"); err != nil {
		c.fatalf("%v", err)
	}
	ctx, cancel = apiCtx()
	_, err = res.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	cancel()
	return n + expectInvalid(c, "a change of spec.shards", err, "spec.shards")
}

func expectInvalid(c sc, what string, err error, field string) int {
	c.Helper()
	if err == nil {
		c.errorf("%s was accepted by the API, want it refused naming %s", what, field)
		return 0
	}
	status, ok := err.(apierrors.APIStatus)
	code := int32(0)
	if ok {
		code = status.Status().Code
	}
	if code < 400 || code > 499 {
		c.errorf("%s: refused with status %d, want 4xx: %v", what, code, err)
		return 0
	}
	if !strings.Contains(err.Error(), field) {
		c.errorf("%s: the refusal does not name %s: %v", what, field, err)
		return 0
	}
	c.logf("%s: %d %v", what, code, err)
	return 1
}

// badSidecarRequests: malformed requests to a sidecar's peer API (the pod IP) and, through the
// counter's public API, to its app API. None of them may assign, unassign or deliver anything.
// They carry valid credentials (the operator's token on control calls, a registered pod's on
// forwards), so that what refuses them is the validation of the request itself, not the
// authentication in front of it; that one is checked by its own cases.
func (s *suite) badSidecarRequests(c sc) int {
	c.Helper()
	ready := s.pods.Ready()
	if len(ready) == 0 {
		c.fatalf("no ready counter pod")
	}
	pod := ready[0]
	peer := "http://" + net.JoinHostPort(pod.IP, strconv.Itoa(peerPort))
	operator, sender := s.peerTokens(c, pod.Name)
	control := func(h map[string]string) map[string]string { return withBearer(h, operator) }
	forward := func(h map[string]string) map[string]string { return withBearer(h, sender) }
	id := "e2e-bad-input"
	shard := shardid.Of(id, shardCount)
	wrongShard := shard%shardCount + 1
	n := 0
	for _, r := range []struct {
		what, method, path string
		headers            map[string]string
		body               []byte
	}{
		{"assign: body not JSON", "POST", "/v1/shards/assign", control(nil), []byte("not json")},
		{"assign: epoch not a number", "POST", "/v1/shards/assign", control(nil), []byte(`{"shardMap":"e2e/none","epoch":"seven","shards":"1-3"}`)},
		{"assign: shards out of range", "POST", "/v1/shards/assign", control(nil), []byte(`{"shardMap":"e2e/none","epoch":1,"shards":"0-400"}`)},
		{"assign: another ShardMap", "POST", "/v1/shards/assign", control(nil), []byte(`{"shardMap":"e2e/none","epoch":1,"shards":"1"}`)},
		{"unassign: bad range", "POST", "/v1/shards/unassign", control(nil), []byte(`{"shardMap":"e2e/none","epoch":1,"shards":"5-2,x"}`)},
		{"unassign: body an array", "POST", "/v1/shards/unassign", control(nil), []byte(`[1,2,3]`)},
		{"forward: no Kshard-Shard", "POST", "/v1/peer/entities/counter/" + id, forward(nil), []byte(`{"op":"get"}`)},
		{"forward: Kshard-Shard not a number", "POST", "/v1/peer/entities/counter/" + id, forward(map[string]string{"Kshard-Shard": "abc"}), []byte(`{"op":"get"}`)},
		{"forward: wrong shard for the id", "POST", "/v1/peer/entities/counter/" + id, forward(map[string]string{"Kshard-Shard": strconv.Itoa(wrongShard)}), []byte(`{"op":"get"}`)},
		{"forward: bad Kshard-Mode", "POST", "/v1/peer/entities/counter/" + id, forward(map[string]string{"Kshard-Shard": strconv.Itoa(shard), "Kshard-Mode": "sometimes"}), []byte(`{"op":"get"}`)},
		{"forward: id of 2000 bytes", "POST", "/v1/peer/entities/counter/" + strings.Repeat("x", 2000), forward(nil), []byte(`{"op":"get"}`)},
		{"unknown path", "GET", "/v1/no-such-thing", nil, nil},
		{"ping with the wrong method", "DELETE", "/v1/ping", control(nil), nil},
	} {
		n += expectValidationRefusal(c, "sidecar peer API, "+r.what, r.method, peer+r.path, r.headers, r.body)
	}
	// The authentication in front: a well-formed assign without a token, or with the token a pod
	// sends its peers (another audience than the operator's for this map: 401).
	assign := []byte(`{"shardMap":"` + s.cfg.counterNS + `/` + s.cfg.counterName + `","epoch":1,"shards":"1"}`)
	n += expectStatus(c, "sidecar peer API, assign without a token", "POST", peer+"/v1/shards/assign", nil, assign, http.StatusUnauthorized)
	n += expectStatus(c, "sidecar peer API, assign with a pod's peer token", "POST", peer+"/v1/shards/assign", forward(nil), assign, http.StatusUnauthorized)
	// Too large: 413, or the connection closed before the whole body was sent.
	big := bytes.Repeat([]byte("x"), 5<<20)
	if code, reply, err := httpDo("POST", peer+"/v1/peer/entities/counter/"+id, forward(nil), big); err == nil && (code < 400 || code > 499) {
		c.errorf("sidecar peer API, body of 5 MiB: answered %d %s, want 413", code, truncate(reply, 120))
	} else {
		c.logf("sidecar peer API, body of 5 MiB: %d %v", code, err)
		n++
	}
	// Not HTTP at all: the sidecar answers 400 or closes the connection, and stays up.
	if reply, err := rawExchange(net.JoinHostPort(pod.IP, strconv.Itoa(peerPort)), "\x16\x03\x01\x02\x00garbage\r\n\r\n"); err == nil &&
		reply != "" && !strings.HasPrefix(reply, "HTTP/1.1 4") && !strings.HasPrefix(reply, "HTTP/1.0 4") {
		c.errorf("sidecar peer API, bytes that are not HTTP: answered %q, want a 4xx or a closed connection", truncate(reply, 80))
	} else {
		n++
	}
	// The app API (127.0.0.1:7100) is reached through the counter, which forwards its answer.
	public := "http://" + net.JoinHostPort(pod.IP, strconv.Itoa(publicPort))
	n += expect4xx(c, "sidecar app API (through the counter), id of 2000 bytes", "POST", public+"/counters/"+strings.Repeat("y", 2000)+"/increment", nil, nil)
	n += expect4xx(c, "counter public API, by not a number", "POST", public+"/counters/"+id+"/increment?by=many", nil, nil)
	return n
}

// rawExchange writes bytes on a TCP connection and returns what comes back until it closes.
func rawExchange(addr, payload string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(payload)); err != nil {
		return "", nil // closed on us: fine
	}
	b, _ := io.ReadAll(io.LimitReader(conn, 4096))
	return string(b), nil
}

// badManagerRequests: malformed requests to the leading operator's manager API. (Followers
// answer 503 NotLeader before looking at a request, so the leader is the one to test.)
func (s *suite) badManagerRequests(c sc) int {
	c.Helper()
	// The leader named in status.manager may have stepped down since it was written (one extra
	// leadership change follows an API server outage, see docs/reliability.md): wait until the
	// replica status.manager names answers as the leader, reading the ShardMap afresh each time.
	var m *shardmap.ShardMap
	if _, err := wait.Until(60*time.Second, 500*time.Millisecond, func() (bool, string) {
		got, err := s.getMap()
		if err != nil {
			return false, err.Error()
		}
		if got.Status.Manager.Address == "" {
			return false, "status.manager has no address"
		}
		url := "http://" + got.Status.Manager.Address + "/v1/shardmaps/" + s.cfg.counterNS + "/" + s.cfg.counterName + "/assignments"
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		// A follower answers 503 NotLeader before anything else; the leader asks for a token.
		if resp.StatusCode != http.StatusUnauthorized {
			return false, fmt.Sprintf("GET %s answered %d, not the leader's 401", url, resp.StatusCode)
		}
		m = got
		return true, ""
	}); err != nil {
		c.errorf("no operator replica answers as the leader: %v", err)
		return 0
	}
	base := "http://" + m.Status.Manager.Address + "/v1/shardmaps/" + s.cfg.counterNS + "/" + s.cfg.counterName
	n := 0
	for _, r := range []struct {
		what, method, url string
		body              []byte
	}{
		{"register: body not JSON", "POST", base + "/register", []byte("{")},
		{"register: pod not a string", "POST", base + "/register", []byte(`{"pod":5,"uid":"u","address":"10.244.9.9:7101","version":"1"}`)},
		{"register: fields missing", "POST", base + "/register", []byte(`{}`)},
		{"register: a pod that does not exist", "POST", base + "/register", []byte(`{"pod":"e2e-no-such-pod","uid":"0000","address":"10.244.250.250:7101","version":"1.0.0"}`)},
		{"unregister: body an array", "POST", base + "/unregister", []byte(`[]`)},
		{"notify-unhealthy: pod not a string", "POST", base + "/notify-unhealthy", []byte(`{"pod":123}`)},
		{"assignments of a ShardMap that does not exist", "GET", "http://" + m.Status.Manager.Address + "/v1/shardmaps/" + s.cfg.counterNS + "/e2e-no-such-map/assignments", nil},
		{"invalid ShardMap reference", "POST", "http://" + m.Status.Manager.Address + "/v1/shardmaps/Bad_NS!/x/register", []byte(`{}`)},
		{"unknown path", "GET", "http://" + m.Status.Manager.Address + "/v2/nothing", nil},
	} {
		n += expect4xx(c, "manager API, "+r.what, r.method, r.url, nil, r.body)
	}
	return n
}

// badWebhookRequests: malformed AdmissionReviews straight to every operator replica's webhook,
// and pods with bad kshard annotations through the API (dry-run: nothing is created).
func (s *suite) badWebhookRequests(c sc) int {
	c.Helper()
	n := 0
	_, ops, err := s.operatorDeployment()
	if err != nil {
		c.errorf("operator pods: %v", err)
		return 0
	}
	for _, p := range ops {
		url := "https://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(webhookPort)) + "/mutate-pods"
		for _, r := range []struct{ what, body string }{
			{"body not JSON", "<xml/>"},
			{"not an AdmissionReview", `{"kind":"Pod"}`},
			{"no request", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`},
			{"request without uid", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`},
		} {
			n += expect4xx(c, "webhook of "+p.Name+", "+r.what, "POST", url, nil, []byte(r.body))
		}
	}
	for _, tc := range []struct {
		what        string
		annotations map[string]string
		labels      map[string]string
		field       string
	}{
		{"app-port not a number", map[string]string{"kshard.io/app-port": "banana", "kshard.io/shard-map": s.cfg.counterName}, nil, "kshard.io/app-port"},
		{"app-port of the sidecar", map[string]string{"kshard.io/app-port": strconv.Itoa(peerPort), "kshard.io/shard-map": s.cfg.counterName}, nil, "kshard.io/app-port"},
		{"app-port out of range", map[string]string{"kshard.io/app-port": "70000", "kshard.io/shard-map": s.cfg.counterName}, nil, "kshard.io/app-port"},
		{"ShardMap name invalid", map[string]string{"kshard.io/shard-map": "Not_A_Name!"}, nil, "ShardMap name"},
		{"no ShardMap name at all", map[string]string{}, nil, "kshard.io/shard-map"},
	} {
		ann := map[string]string{"kshard.io/inject": "true"}
		for k, v := range tc.annotations {
			ann[k] = v
		}
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-bad-", Annotations: ann, Labels: tc.labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: s.cfg.counterImageOf(oldVersion)}},
				ServiceAccountName: s.cfg.counterName},
		}
		ctx, cancel := apiCtx()
		_, err := s.cs.CoreV1().Pods(s.cfg.counterNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		cancel()
		n += expectInvalid(c, "pod with "+tc.what, err, tc.field)
	}
	return n
}
