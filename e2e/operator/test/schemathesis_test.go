package operatortest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The manager API against its OpenAPI description (docs/openapi/manager.yaml), with Schemathesis
// (e2e/schemathesis/manager.toml): a real operator, leader of a namespace whose ShardMap two stub
// pods share, takes Schemathesis' generated and mutated calls for every operation, on the manager
// port and the admin port. It runs with --pod-auth=none, so that the bodies reach their parsers
// (the authentication has its own test). Every answer must be documented, with its schema and
// content type, and no 5xx but the documented ones. Without authentication Schemathesis may
// unregister the stub pods (it learns their names from the assignments answer), so afterwards the
// operator must still be ready, and the ShardMap consistent: no shard on two pods, and every
// assigned shard on a pod that is still registered.
func TestManagerApiMatchesItsOpenApiDescription(t *testing.T) {
	schemathesis := env(t, "KSHARD_SCHEMATHESIS")
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	c := clients(t)
	ns := testNamespace(t, c, "op-api")
	const sm = "counter"
	if _, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Create(bg(), newShardMap(ns, sm, map[string]any{
		"shards": shardCount, "rebalanceInterval": "2s", "pingTimeout": "2s", "handoffTimeout": "5s",
	}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ShardMap: %v", err)
	}
	op := startOperator(t, "op-a", ns, ns, "--pod-auth=none")
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(bg(), stubDeployment(sm, sm, "1.0.0", 2, []string{op.manager}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, "the 2 stub pods register and share the shards", func() (bool, string) {
		return converged(t, c, ns, sm, 2)
	})

	logDir := env(t, "KSHARD_OPERATOR_LOGS")
	for _, target := range []struct{ tag, address string }{{"manager", op.manager}, {"admin", op.admin}} {
		logPath := filepath.Join(logDir, "schemathesis-"+target.tag+".log")
		cmd := exec.Command(schemathesis, "--config-file", filepath.Join(repo, "e2e/schemathesis/manager.toml"),
			"run", filepath.Join(repo, "docs/openapi/manager.yaml"), "--url", "http://"+target.address,
			"--include-tag", target.tag, "--no-color")
		cmd.Env = append(os.Environ(), "KSHARD_SCHEMATHESIS_NAMESPACE="+ns, "KSHARD_SCHEMATHESIS_SHARDMAP="+sm)
		out, err := cmd.CombinedOutput()
		_ = os.WriteFile(logPath, out, 0o644)
		text := string(out)
		if err != nil {
			if i := strings.Index(text, "FAILURES"); i >= 0 {
				text = text[i:]
			}
			if len(text) > 6000 {
				text = text[:6000]
			}
			t.Errorf("Schemathesis found answers of the %s API that its description does not allow (%v; full output %s):\n%s",
				target.tag, err, logPath, text)
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "passed") || strings.Contains(line, "test cases") {
				t.Logf("%s API: %s", target.tag, strings.TrimSpace(line))
			}
		}
	}

	select {
	case <-op.exited:
		t.Fatalf("the operator exited during the run: %v; log:\n%s", op.exitState, tail(op.logPath, 40))
	default:
	}
	if code, body := httpGet("http://" + op.admin + "/readyz"); code != 200 {
		t.Fatalf("after the run the operator is not ready: %d %s", code, body)
	}
	waitFor(t, 60*time.Second, "after the run every assigned shard is on a registered pod", func() (bool, string) {
		st, err := getStatus(t, c, ns, sm)
		if err != nil {
			return false, err.Error()
		}
		owners, err := st.owners()
		if err != nil {
			return false, err.Error()
		}
		registered := map[string]bool{}
		for _, p := range st.Pods {
			registered[p.Name] = true
		}
		for shard, owner := range owners {
			if !registered[owner] {
				return false, fmt.Sprintf("shard %d: owner %q is not a registered pod (pods %v)", shard, owner, registered)
			}
		}
		return true, ""
	})
}
