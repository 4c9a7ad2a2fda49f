package securitytest

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// refusedChangesNothing checks, after attacks on `v`, that it holds what it held and that the
// map's epoch did not move (an attack must not even make the operator persist).
func refusedChangesNothing(t *testing.T, c clusterClients, v victim, token, before string) {
	t.Helper()
	if after := owned(t, v, token); after != before {
		t.Errorf("refused calls changed what %s holds: %q -> %q", v.pod, before, after)
	}
	if st, _ := getStatus(t, c, victimNamespace, victimMap); st.Epoch != v.epoch {
		t.Errorf("refused calls changed demo/counter's epoch: %d -> %d", v.epoch, st.Epoch)
	}
}

// Issue 29, critical: the operator sent one token (audience kshard) on every ping, assign and
// unassign, to whatever address a registered pod gave, and every sidecar took it. A tenant's pod
// registered, received it on the next ping, and replayed it against another tenant's sidecars.
func TestTheOperatorsCredentialAPodReceivesOpensOnlyItsOwnShardMap(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	var captured []string
	waitFor(t, 60*time.Second, "the operator pinged the attacker's fake sidecar with a credential", func() (bool, string) {
		captured = a.captured(t)
		return len(captured) > 0, "nothing captured yet"
	})
	want := []string{"kshard.io/sidecar/" + attackNamespace + "/" + attackMap}
	for _, credential := range captured {
		if aud := jwtAudiences(t, credential); !slices.Equal(aud, want) {
			t.Errorf("the operator sent the attacker a token for %v; it may be for %v only", aud, want)
		}
	}
	v := firstVictim(t, c)
	token := operatorToken(t, c)
	before := owned(t, v, token)
	for _, credential := range captured {
		for _, attack := range []struct{ what, method, path, body string }{
			{"ping", http.MethodGet, "/v1/ping?" + v.targetQuery(), ""},
			{"assign", http.MethodPost, "/v1/shards/assign", v.command(v.epoch+1, "1-4")},
			{"unassign at epoch 2^64-1", http.MethodPost, "/v1/shards/unassign", v.command(math.MaxUint64, before)},
		} {
			status, body := a.send(t, attack.method, "http://"+v.address+attack.path, attack.body, credential)
			if status != 401 {
				t.Errorf("%s of %s with the operator's credential for the attacker's map: %d %s, want 401",
					attack.what, v.pod, status, body)
			}
		}
	}
	refusedChangesNothing(t, c, v, token, before)
}

// A tenant may mint its own ServiceAccount's tokens for any audience: for the victim's sidecars,
// its peers, the operator, the API server. None steers another tenant's shards, whatever the
// epoch, and none gets a forwarded message taken.
func TestNoTokenATenantCanMintSteersAnotherTenantsShards(t *testing.T) {
	c := clients(t)
	a := startAttacker(t, c)
	v := firstVictim(t, c)
	token := operatorToken(t, c)
	before := owned(t, v, token)
	for file := range attackerAudiences {
		for _, epoch := range []uint64{v.epoch, v.epoch + 1, math.MaxUint64} {
			for _, verb := range []string{"assign", "unassign"} {
				status, body := a.send(t, http.MethodPost, "http://"+v.address+"/v1/shards/"+verb,
					v.command(epoch, before), file)
				if status != 401 && status != 403 {
					t.Errorf("%s at epoch %d with the tenant's %q token: %d %s, want 401 or 403",
						verb, epoch, attackerAudiences[file], status, body)
				}
			}
		}
		status, body := a.send(t, http.MethodPost, "http://"+v.address+"/v1/peer/entities/counter/attack", "{}", file)
		if status != 401 && status != 403 {
			t.Errorf("a forwarded message with the tenant's %q token: %d %s, want 401 or 403",
				attackerAudiences[file], status, body)
		}
	}
	refusedChangesNothing(t, c, v, token, before)
}

// Epochs are fences: before, one unassign at 2^64-1 with any accepted credential fenced the
// shards for good. Even the operator's own credential cannot push a fence further than the
// operator could have issued.
func TestNoUnassignFencesShardsBeyondTheEpochsTheOperatorCanReach(t *testing.T) {
	c := clients(t)
	v := firstVictim(t, c)
	token := operatorToken(t, c)
	before := owned(t, v, token)
	status, body := httpDo(t, http.MethodPost, "http://"+v.address+"/v1/shards/unassign",
		v.command(math.MaxUint64, before), token)
	if status != 409 || !strings.Contains(body, "EpochTooFarAhead") {
		t.Errorf("unassign at epoch 2^64-1 with the operator's credential: %d %s, want 409 EpochTooFarAhead", status, body)
	}
	refusedChangesNothing(t, c, v, token, before)
}

// A peer receives each sender's token with every forwarded message. Before, that token (audience
// kshard) also opened the manager API as the sender: a peer could unregister it.
func TestAPeerTokenIsNoGoodToTheManagerApi(t *testing.T) {
	c := clients(t)
	v := firstVictim(t, c)
	peerToken := sentToPeers(t, c, v)
	if aud := jwtAudiences(t, peerToken); !slices.Equal(aud, []string{"kshard.io/peer/" + victimNamespace + "/" + victimMap}) {
		t.Errorf("the victim's sidecar sends its peers a token for %v", aud)
	}
	leader := leaderAddress(t, c)
	for _, verb := range []string{"unregister", "register"} {
		body := fmt.Sprintf(`{"pod":%q,"uid":%q,"address":%q,"version":"1.0.0","incarnation":%q}`,
			v.pod, v.uid, v.ip+":9", v.incarnation)
		status, answer := httpDo(t, http.MethodPost,
			"http://"+leader+"/v1/shardmaps/"+victimNamespace+"/"+victimMap+"/"+verb, body, peerToken)
		if status != 401 {
			t.Errorf("%s of %s with the token it sends its peers: %d %s, want 401", verb, v.pod, status, answer)
		}
	}
	st, _ := getStatus(t, c, victimNamespace, victimMap)
	for _, p := range st.Pods {
		if p.Name == v.pod && p.Address != v.address {
			t.Errorf("the victim's address changed: %s -> %s", v.address, p.Address)
		}
	}
}

// sentToPeers is the token the victim's sidecar sends with its forwarded messages: the file its
// environment names, as the kubelet projected it (what any peer of the victim receives).
func sentToPeers(t *testing.T, c clusterClients, v victim) string {
	t.Helper()
	pod, err := c.Clientset.CoreV1().Pods(victimNamespace).Get(bg(), v.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, ctr := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if ctr.Name != "kshard-sidecar" {
			continue
		}
		for _, e := range ctr.Env {
			// KSHARD_MANAGER_TOKEN_FILE: the one token a sidecar sent everyone before.
			if e.Name == "KSHARD_PEER_TOKEN_FILE" || (file == "" && e.Name == "KSHARD_MANAGER_TOKEN_FILE") {
				file = e.Value
			}
		}
	}
	if file == "" {
		t.Fatalf("the sidecar of %s names no token file", v.pod)
	}
	// The sidecar mounts its token volume (projected) at the file's directory: the kubelet keeps
	// the volume under its root, by the pod's UID and the volume's name.
	path := filepath.Join(env(t, "KSHARD_CLUSTER_DIR"), "kubelet", "pods", string(pod.UID), "volumes",
		"kubernetes.io~projected", "kshard-token", filepath.Base(file))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the victim's peer token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// leaderAddress is the manager API of the replica holding the Lease.
func leaderAddress(t *testing.T, c clusterClients) string {
	t.Helper()
	return leader(t, c).Status.PodIP + ":7200"
}
