// Package securitytest is kshard's attack suite on the local cluster (e2e/security/run.sh, after
// e2e/install.sh): a tenant of another namespace and of another ShardMap tries to steer the shards
// of demo/counter, read its pods' addresses and replay what it receives. Each test is one finding
// of issue 29 (docs/security.md lists them and their results).
package securitytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"kshard.local/e2e/support/envvar"
	"kshard.local/e2e/support/kubeclient"
	"kshard.local/e2e/support/wait"
)

var shardMapGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmaps"}

const (
	kshardNamespace = "kshard-system"
	victimNamespace = "demo"
	victimMap       = "counter"
	// The attacker's namespace and the ShardMap it claims there.
	attackNamespace = "kshard-attack"
	attackMap       = "attacker"
	// The node's address: what a hostNetwork pod on the node sends from.
	nodeIP = "10.244.0.1"
)

// env returns a variable that run.sh sets, and fails the test when it is not set.
var env = envvar.ForTests("run the suite through e2e/security/run.sh")

// clusterClients are the cluster's clients: Clientset, and Dynamic for the ShardMaps.
type clusterClients = kubeclient.Clients

// clients has client-go's default limits (no Limits).
func clients(t *testing.T) clusterClients {
	t.Helper()
	return kubeclient.ForTest(t, env(t, "KUBECONFIG"), kubeclient.Limits{})
}

func bg() context.Context { return context.Background() }

// waitFor polls cond every 250 ms until it holds, failing after timeout with what cond last said.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	wait.For(t, timeout, 250*time.Millisecond, "until "+what, cond)
}

func kubectl(args ...string) (string, error) {
	out, err := exec.Command("kubectl", args...).CombinedOutput()
	return string(out), err
}

// mapStatus is the part of a ShardMap's status the suite reads.
type mapStatus struct {
	Epoch uint64 `json:"epoch"`
	Pods  []struct {
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Incarnation string `json:"incarnation"`
		Address     string `json:"address"`
	} `json:"pods"`
	Assignments []struct {
		Pod    string `json:"pod"`
		Shards string `json:"shards"`
	} `json:"assignments"`
}

func getStatus(t *testing.T, c clusterClients, ns, name string) (mapStatus, bool) {
	t.Helper()
	obj, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Get(bg(), name, metav1.GetOptions{})
	if err != nil {
		return mapStatus{}, false
	}
	raw, _ := json.Marshal(obj.Object["status"])
	var st mapStatus
	_ = json.Unmarshal(raw, &st)
	return st, true
}

// victim is a pod of demo/counter: the target of the attacks.
type victim struct {
	pod, uid, incarnation, address, ip string
	epoch                              uint64
}

func (v victim) targetQuery() string {
	return fmt.Sprintf("pod=%s&uid=%s&incarnation=%s", v.pod, v.uid, v.incarnation)
}

// command is an assign or unassign body for the victim.
func (v victim) command(epoch uint64, shards string) string {
	b, _ := json.Marshal(map[string]any{"shardMap": victimNamespace + "/" + victimMap, "pod": v.pod,
		"uid": v.uid, "incarnation": v.incarnation, "epoch": epoch, "shards": shards})
	return string(b)
}

// firstVictim is the first registered pod of demo/counter.
func firstVictim(t *testing.T, c clusterClients) victim {
	t.Helper()
	var v victim
	waitFor(t, 120*time.Second, "demo/counter has a registered pod", func() (bool, string) {
		st, ok := getStatus(t, c, victimNamespace, victimMap)
		if !ok || len(st.Pods) == 0 {
			return false, "no pods"
		}
		p := st.Pods[0]
		v = victim{pod: p.Name, uid: p.UID, incarnation: p.Incarnation, address: p.Address,
			ip: strings.Split(p.Address, ":")[0], epoch: st.Epoch}
		return true, ""
	})
	return v
}

// operatorToken is the operator's real credential for demo/counter's sidecars, minted as the
// operator mints it: to read what the victim holds without changing anything.
func operatorToken(t *testing.T, c clusterClients) string {
	t.Helper()
	tr, err := c.Clientset.CoreV1().ServiceAccounts(kshardNamespace).CreateToken(bg(), "kshard",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			Audiences:         []string{"kshard.io/sidecar/" + victimNamespace + "/" + victimMap},
			ExpirationSeconds: ptr.To(int64(600)),
		}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("minting the operator's token for demo/counter: %v", err)
	}
	return tr.Status.Token
}

// owned is what the victim's sidecar holds, asked with the operator's own credential.
func owned(t *testing.T, v victim, token string) string {
	t.Helper()
	status, body := httpDo(t, http.MethodGet, "http://"+v.address+"/v1/ping?"+v.targetQuery(), "", token)
	if status != 200 {
		t.Fatalf("ping of %s with the operator's token: %d %s", v.pod, status, body)
	}
	var p struct {
		Shards string `json:"shards"`
	}
	_ = json.Unmarshal([]byte(body), &p)
	return p.Shards
}

// httpDo sends a request from the test's host (which shares the node's network, as a hostNetwork
// pod would) with an optional bearer token.
func httpDo(t *testing.T, method, url, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// jwtAudiences reads, without verifying, the aud claim of a token ("Bearer " prefix allowed).
func jwtAudiences(t *testing.T, token string) []string {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(token, "Bearer "), ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.40s...", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("JWT claims: %v", err)
	}
	var claims struct {
		Aud any `json:"aud"`
	}
	_ = json.Unmarshal(raw, &claims)
	switch a := claims.Aud.(type) {
	case string:
		return []string{a}
	case []any:
		out := make([]string, 0, len(a))
		for _, x := range a {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// attackerPod is the tenant's pod, which poses as a sidecar of kshard-attack/attacker
// (e2e/security/cmd/attacker).
type attackerPod struct {
	ip string
}

var (
	attackerOnce sync.Once
	attackerIP   string
	attackerErr  error
)

// The tokens the attacker's pod mounts for its own ServiceAccount: what any tenant may put in
// its pod (its account's tokens, for any audience it names).
var attackerAudiences = map[string]string{
	"kshard":            "kshard",             // the one audience of old
	"operator":          "kshard.io/operator", // a sidecar's, for the manager API
	"peer":              "kshard.io/peer/" + attackNamespace + "/" + attackMap,
	"victim-operator":   "kshard.io/sidecar/" + victimNamespace + "/" + victimMap,
	"victim-peer":       "kshard.io/peer/" + victimNamespace + "/" + victimMap,
	"kubernetes-server": "https://kubernetes.default.svc.cluster.local",
}

// startAttacker creates (once per run) the attacker's namespace and pod, and waits until the
// operator took its register.
func startAttacker(t *testing.T, c clusterClients) attackerPod {
	t.Helper()
	attackerOnce.Do(func() { attackerIP, attackerErr = createAttacker(c) })
	if attackerErr != nil {
		t.Fatalf("the attacker's pod: %v", attackerErr)
	}
	a := attackerPod{ip: attackerIP}
	waitFor(t, 120*time.Second, "the attacker registered with the operator", func() (bool, string) {
		status, body := httpDo(t, http.MethodGet, "http://"+a.ip+":8080/registered", "", "")
		return status == 200, fmt.Sprintf("%d %s", status, body)
	})
	return a
}

func createAttacker(c clusterClients) (string, error) {
	_, err := c.Clientset.CoreV1().Namespaces().Create(bg(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: attackNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := c.Clientset.CoreV1().ServiceAccounts(attackNamespace).Get(bg(), "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return "", fmt.Errorf("no default ServiceAccount in %s: %w", attackNamespace, err)
		}
	}
	ops, err := c.Clientset.CoreV1().Pods(kshardNamespace).List(bg(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil || len(ops.Items) == 0 {
		return "", fmt.Errorf("the operator pods: %v (%d)", err, len(ops.Items))
	}
	var managers []string
	for _, p := range ops.Items {
		managers = append(managers, p.Status.PodIP+":7200")
	}
	var sources []v1.VolumeProjection
	for file, audience := range attackerAudiences {
		sources = append(sources, v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
			Audience: audience, ExpirationSeconds: ptr.To(int64(3600)), Path: file}})
	}
	field := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "attacker",
			// The label kshard watches, and the injector's marker, forged: no sidecar is injected.
			Labels:      map[string]string{"kshard.io/shard-map": attackMap},
			Annotations: map[string]string{"kshard.io/injected": "forged", "kshard.io/shards": "4"},
		},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{{Name: "tokens", VolumeSource: v1.VolumeSource{
				Projected: &v1.ProjectedVolumeSource{Sources: sources}}}},
			Containers: []v1.Container{{
				Name:  "attacker",
				Image: "kshard/attacker:1",
				Env: []v1.EnvVar{field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
					field("POD_UID", "metadata.uid"), field("POD_IP", "status.podIP"),
					{Name: "KSHARD_SHARD_MAP", Value: attackMap},
					{Name: "KSHARD_MANAGERS", Value: strings.Join(managers, ",")},
					{Name: "KSHARD_TOKEN_DIR", Value: "/var/run/secrets/attack"}},
				VolumeMounts: []v1.VolumeMount{{Name: "tokens", MountPath: "/var/run/secrets/attack", ReadOnly: true}},
			}},
		},
	}
	if _, err := c.Clientset.CoreV1().Pods(attackNamespace).Create(bg(), pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		p, err := c.Clientset.CoreV1().Pods(attackNamespace).Get(bg(), "attacker", metav1.GetOptions{})
		if err == nil && p.Status.PodIP != "" {
			if resp, err := http.Get("http://" + p.Status.PodIP + ":8080/healthz"); err == nil {
				resp.Body.Close()
				return p.Status.PodIP, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the attacker pod did not serve within 120 s: %v", err)
		}
	}
}

// send makes a request from inside the attacker's pod. `token` is the base name of one of its
// mounted token files, a captured "Bearer ..." header, or "" for none.
func (a attackerPod) send(t *testing.T, method, url, body, token string) (int, string) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"method": method, "url": url, "body": body, "token": token,
		"headers": map[string]string{"Content-Type": "application/json", "Kshard-Shard": "1"}})
	resp, err := http.Post("http://"+a.ip+":8080/send", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatalf("the attacker's pod: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("the attacker's answer: %v", err)
	}
	return out.Status, out.Body
}

// captured are the credentials the operator sent the attacker's fake sidecar.
func (a attackerPod) captured(t *testing.T) []string {
	t.Helper()
	status, body := httpDo(t, http.MethodGet, "http://"+a.ip+":8080/captured", "", "")
	if status != 200 {
		t.Fatalf("the attacker's captures: %d %s", status, body)
	}
	var out struct {
		Authorization []string `json:"authorization"`
	}
	_ = json.Unmarshal([]byte(body), &out)
	return out.Authorization
}
