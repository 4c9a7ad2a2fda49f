package operatortest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"kshard.local/e2e/support/shards"
)

const (
	stubImage     = "kshard/operator-stub-pod:1.0.0"
	shardCount    = 60
	leaseDuration = 15 * time.Second // the operator's default, as client-go's
	retryPeriod   = 2 * time.Second
)

// stubDeployment runs the stub sidecar (e2e/operator/cmd/stub-pod) labelled for ShardMap `sm`.
func stubDeployment(name, sm, version string, replicas int32, managers []string) *appsv1.Deployment {
	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	labels := map[string]string{"app": name}
	podLabels := map[string]string{"app": name, "kshard.io/shard-map": sm, "app.kubernetes.io/version": version}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				// The injector's marker: the operator creates a missing ShardMap only for such pods.
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels,
					Annotations: map[string]string{"kshard.io/injected": "container"}},
				Spec: v1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(30)),
					// What the sidecar injector mounts: the pod's token for the operator.
					Volumes: []v1.Volume{{Name: "kshard-token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
						Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
							Audience: "kshard.io/operator", ExpirationSeconds: ptr.To(int64(3600)), Path: "operator"}}}}}}},
					Containers: []v1.Container{{
						Name:  "stub-sidecar",
						Image: stubImage,
						Env: []v1.EnvVar{
							fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
							fieldEnv("POD_UID", "metadata.uid"), fieldEnv("POD_IP", "status.podIP"),
							fieldEnv("KSHARD_VERSION", "metadata.labels['app.kubernetes.io/version']"),
							{Name: "KSHARD_SHARD_MAP", Value: sm},
							{Name: "KSHARD_MANAGERS", Value: strings.Join(managers, ",")},
							{Name: "KSHARD_MANAGER_TOKEN_FILE", Value: "/var/run/secrets/kshard.io/token/operator"},
						},
						VolumeMounts: []v1.VolumeMount{{Name: "kshard-token", MountPath: "/var/run/secrets/kshard.io/token", ReadOnly: true}},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
							Path: "/healthz", Port: intstr.FromInt32(7101)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
}

// converged checks the stored map: `pods` registered, every shard assigned once, counts within
// one, the conditions true, and every pod holding exactly what the map gives it (asked directly).
func converged(t *testing.T, c clusterClients, ns, sm string, pods int) (bool, string) {
	return convergedWith(t, c, ns, sm, pods, shardCount, true)
}

// convergedWith is converged for any shard count; without `balanced` the counts and the
// Balanced/Progressing conditions are not checked (balancing is rate-limited per round).
func convergedWith(t *testing.T, c clusterClients, ns, sm string, pods, shardCount int, balanced bool) (bool, string) {
	st, err := getStatus(t, c, ns, sm)
	if err != nil {
		return false, err.Error()
	}
	owners, err := st.owners()
	if err != nil {
		t.Fatalf("stored map is inconsistent: %v", err)
	}
	counts := map[string]int{}
	for _, p := range st.Pods {
		counts[p.Name] = p.Shards
	}
	state := fmt.Sprintf("epoch %d, %d pods %v, %d unassigned, Ready=%s Balanced=%s Progressing=%s",
		st.Epoch, len(st.Pods), counts, st.UnassignedCount, st.condition("Ready"),
		st.condition("Balanced"), st.condition("Progressing"))
	if len(st.Pods) != pods || st.UnassignedCount != 0 || len(owners) != shardCount {
		return false, state
	}
	lo, hi := shardCount, 0
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	if st.condition("Ready") != "True" {
		return false, state
	}
	if balanced && (hi-lo > 1 || st.condition("Balanced") != "True" || st.condition("Progressing") != "False") {
		return false, state
	}
	for _, p := range st.Pods {
		code, body := httpGet("http://" + p.Address + "/v1/ping")
		if code != 200 {
			return false, fmt.Sprintf("%s: ping %d %s", p.Name, code, body)
		}
		var ping struct {
			Pod    string `json:"pod"`
			Shards string `json:"shards"`
		}
		_ = json.Unmarshal([]byte(body), &ping)
		held, _ := shards.Parse(ping.Shards)
		if len(held) != p.Shards {
			return false, fmt.Sprintf("%s holds %d shards, the map gives it %d", p.Name, len(held), p.Shards)
		}
		for _, s := range held {
			if owners[s] != p.Name {
				return false, fmt.Sprintf("%s holds shard %d, which the map gives to %q", p.Name, s, owners[s])
			}
		}
	}
	return true, state
}

// unassignsSeen sums the unassign calls the stub pods received.
func unassignsSeen(t *testing.T, c clusterClients, ns, sm string) int {
	st, err := getStatus(t, c, ns, sm)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range st.Pods {
		_, body := httpGet("http://" + p.Address + "/debug/stats")
		var stats map[string]int
		_ = json.Unmarshal([]byte(body), &stats)
		total += stats["unassigns"]
	}
	return total
}

func scale(t *testing.T, c clusterClients, ns, name string, replicas int32) {
	t.Helper()
	d, err := c.Clientset.AppsV1().Deployments(ns).Get(bg(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To(replicas)
	if _, err := c.Clientset.AppsV1().Deployments(ns).Update(bg(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func leaseHolder(t *testing.T, c clusterClients, ns string) string {
	l, err := c.Clientset.CoordinationV1().Leases(ns).Get(bg(), "kshard-operator", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// handOver stops the leader with `sig` and checks that the other replica takes over within
// `limit` with zero shard moves. Returns the new leader.
func handOver(t *testing.T, c clusterClients, ns, sm string, ops map[string]*operator, sig syscall.Signal, limit time.Duration) *operator {
	t.Helper()
	before, _ := getStatus(t, c, ns, sm)
	ownersBefore, _ := before.owners()
	unassignsBefore := unassignsSeen(t, c, ns, sm)
	old := ops[before.Manager.Pod]
	if old == nil {
		t.Fatalf("status.manager names %q, not one of the replicas", before.Manager.Pod)
	}
	var next *operator
	for name, op := range ops {
		if name != old.name {
			next = op
		}
	}
	start := time.Now()
	old.stop(t, sig)
	took := waitFor(t, limit+10*time.Second, next.name+" leads and has written status.manager", func() (bool, string) {
		st, err := getStatus(t, c, ns, sm)
		if err != nil {
			return false, err.Error()
		}
		holder := leaseHolder(t, c, ns)
		return st.Manager.Pod == next.name && holder == next.name,
			fmt.Sprintf("lease holder %q, status.manager %q", holder, st.Manager.Pod)
	})
	took = time.Since(start)
	t.Logf("%v to %s: %s took over in %s", sig, old.name, next.name, took.Round(10*time.Millisecond))
	if took > limit {
		t.Errorf("handover took %s, more than %s", took, limit)
	}
	// Let the new leader run its first rounds, then compare.
	waitFor(t, 30*time.Second, "the map is converged after the takeover", func() (bool, string) {
		return converged(t, c, ns, sm, len(before.Pods))
	})
	time.Sleep(3 * time.Second) // one more periodic round (rebalanceInterval 2s) must not move anything
	after, _ := getStatus(t, c, ns, sm)
	ownersAfter, _ := after.owners()
	if !reflect.DeepEqual(ownersBefore, ownersAfter) {
		t.Errorf("shards moved during the takeover")
	}
	if after.Epoch != before.Epoch+1 {
		t.Errorf("epoch went from %d to %d; the takeover should bump it exactly once", before.Epoch, after.Epoch)
	}
	if got := unassignsSeen(t, c, ns, sm); got != unassignsBefore {
		t.Errorf("the pods received %d unassigns during the takeover", got-unassignsBefore)
	}
	if moves := next.metric("kshard_operator_shard_moves_total", `shard_map="`+ns+"/"+sm+`"`); moves != 0 {
		t.Errorf("the new leader counts %v shard moves", moves)
	}
	return next
}

// twoReplicas creates ShardMap `sm` (shardCount shards, quick rounds) in a new namespace and
// starts replicas op-a and op-b (with `extra` flags), and waits until one of them leads it.
func twoReplicas(t *testing.T, c clusterClients, prefix, sm string, extra ...string) (string, *unstructured.Unstructured, map[string]*operator) {
	ns := testNamespace(t, c, prefix)
	created, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Create(bg(), newShardMap(ns, sm, map[string]any{
		"shards": shardCount, "rebalanceInterval": "2s", "rebalanceRetryInterval": "1s",
		"rebalanceRate": 0.5, "pingTimeout": "2s", "handoffTimeout": "5s",
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ShardMap: %v", err)
	}
	ops := map[string]*operator{}
	for _, name := range []string{"op-a", "op-b"} {
		ops[name] = startOperator(t, name, ns, ns, extra...)
	}
	waitFor(t, leaseDuration+10*time.Second, "one replica leads and writes status.manager", func() (bool, string) {
		st, err := getStatus(t, c, ns, sm)
		if err != nil {
			return false, err.Error()
		}
		return ops[st.Manager.Pod] != nil, "status.manager.pod=" + st.Manager.Pod
	})
	return ns, created, ops
}

func TestOperatorAssignsShardsAndHandsOverWithoutMoves(t *testing.T) {
	c := clients(t)
	const sm = "counter"
	ns, _, ops := twoReplicas(t, c, "op-e2e", sm)

	managers := []string{ops["op-a"].manager, ops["op-b"].manager}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(bg(), stubDeployment(sm, sm, "1.0.0", 3, managers), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 120*time.Second, "3 pods share the 60 shards", func() (bool, string) {
		return converged(t, c, ns, sm, 3)
	})
	t.Logf("3 pods converged %s after the Deployment was created", took.Round(10*time.Millisecond))

	out, err := kubectl(t, "get", "shardmaps", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get shardmaps: %v\n%s", err, out)
	}
	t.Logf("kubectl get shardmaps:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !reflect.DeepEqual(strings.Fields(lines[0])[:5], []string{"NAME", "SHARDS", "PODS", "UNASSIGNED", "READY"}) ||
		!reflect.DeepEqual(strings.Fields(lines[1])[:5], []string{sm, "60", "3", "0", "True"}) {
		t.Errorf("kubectl get shardmaps does not show the converged map:\n%s", out)
	}

	// The sidecars' ServiceAccount may read its map: the operator keeps the RoleBinding.
	waitFor(t, 30*time.Second, "the kshard-sidecar RoleBinding names the pods' ServiceAccount", func() (bool, string) {
		rb, err := c.Clientset.RbacV1().RoleBindings(ns).Get(bg(), "kshard-sidecar", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range rb.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == "default" && s.Namespace == ns && rb.RoleRef.Name == "kshard-sidecar" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rb.Subjects)
	})

	// Registers of pods that are not the caller are refused: a pod that does not exist has no
	// token; a real pod's token does not register another incarnation (uid) of it.
	st, _ := getStatus(t, c, ns, sm)
	leaderURL := "http://" + st.Manager.Address + "/v1/shardmaps/" + ns + "/" + sm + "/register"
	code, body := httpPost(leaderURL, `{"pod":"ghost","uid":"u-1","address":"10.244.9.9:7101","version":"1.0.0"}`)
	if code != 401 || !strings.Contains(body, "Unauthenticated") {
		t.Errorf("register of a pod that does not exist: %d %s", code, body)
	}
	realPod := st.Pods[0]
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(bg(), "default", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		Audiences:      []string{"kshard.io/operator"},
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: realPod.Name, UID: types.UID(realPod.UID)},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for pod %s: %v", realPod.Name, err)
	}
	code, body = httpPostAs(leaderURL, fmt.Sprintf(`{"pod":%q,"uid":"not-its-uid","address":%q,"version":"1.0.0"}`, realPod.Name, realPod.Address), tr.Status.Token)
	if code != 403 || !strings.Contains(body, "Forbidden") {
		t.Errorf("register with another uid: %d %s", code, body)
	}
	var follower *operator
	for name, op := range ops {
		if name != st.Manager.Pod {
			follower = op
		}
	}
	code, body = httpPost("http://"+follower.manager+"/v1/shardmaps/"+ns+"/"+sm+"/register", `{}`)
	if code != 503 || !strings.Contains(body, `"leader":"`+st.Manager.Address+`"`) {
		t.Errorf("a follower should answer 503 NotLeader naming %s: %d %s", st.Manager.Address, code, body)
	}

	// The leader dies without releasing its Lease: the follower waits out the lease.
	survivor := handOver(t, c, ns, sm, ops, syscall.SIGKILL, leaseDuration+retryPeriod*6/5+2*time.Second)
	// The killed replica comes back as a follower; then the leader stops gracefully and releases
	// the Lease, so the handover is quick.
	for name, op := range ops {
		if name != survivor.name {
			ops[name] = op.restart(t, ns, ns)
		}
	}
	handOver(t, c, ns, sm, ops, syscall.SIGTERM, leaseDuration)
	for name, op := range ops {
		select {
		case <-op.exited:
			ops[name] = op.restart(t, ns, ns)
		default:
		}
	}

	// Scaling: a fourth pod gets a share; then two pods stop (SIGTERM: they unregister).
	scale(t, c, ns, sm, 4)
	took = waitFor(t, 120*time.Second, "4 pods share the shards", func() (bool, string) { return converged(t, c, ns, sm, 4) })
	t.Logf("4 pods converged in %s", took.Round(10*time.Millisecond))
	scale(t, c, ns, sm, 2)
	took = waitFor(t, 120*time.Second, "2 pods hold every shard after two unregistered", func() (bool, string) { return converged(t, c, ns, sm, 2) })
	t.Logf("2 pods converged in %s after the scale-down", took.Round(10*time.Millisecond))

	// Pods labelled for a ShardMap that does not exist: the leader creates it, with the shard
	// count of their kshard.io/shards annotation, and they register.
	auto := stubDeployment("auto", "auto", "1.0.0", 2, managers)
	auto.Spec.Template.Annotations["kshard.io/shards"] = "24"
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(bg(), auto, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the operator created ShardMap auto with 24 shards", func() (bool, string) {
		obj, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Get(bg(), "auto", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		spec, _ := obj.Object["spec"].(map[string]any)
		return fmt.Sprint(spec["shards"]) == "24", fmt.Sprintf("spec %v", spec)
	})
	took = waitFor(t, 120*time.Second, "the 2 pods of auto registered and every one of its 24 shards is served", func() (bool, string) {
		return convergedWith(t, c, ns, "auto", 2, 24, false)
	})
	t.Logf("ShardMap auto created and all its shards served in %s", took.Round(10*time.Millisecond))
}
