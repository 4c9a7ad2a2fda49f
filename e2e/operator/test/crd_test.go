package operatortest

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The CRD rejects invalid ShardMaps with a message naming the field.
func TestCRDRejectsInvalidShardMaps(t *testing.T) {
	c := clients(t)
	ns := testNamespace(t, c, "sm-crd")
	cases := []struct {
		name  string
		spec  map[string]any
		field string
		says  string
	}{
		{"shards 0", map[string]any{"shards": 0}, "spec.shards", "greater than or equal to 1"},
		{"shards 100001", map[string]any{"shards": 100001}, "spec.shards", "less than or equal to 100000"},
		{"rebalanceRate 0", map[string]any{"shards": 10, "rebalanceRate": 0}, "spec.rebalanceRate", "greater than 0"},
		{"rebalanceRate 1.5", map[string]any{"shards": 10, "rebalanceRate": 1.5}, "spec.rebalanceRate", "less than or equal to 1"},
		{"bad duration", map[string]any{"shards": 10, "rebalanceInterval": "20x"}, "spec.rebalanceInterval", "should match"},
		{"zero ping timeout", map[string]any{"shards": 10, "pingTimeout": "0s"}, "spec.pingTimeout", "greater than zero"},
		{"negative handoff", map[string]any{"shards": 10, "handoffTimeout": "-5s"}, "spec.handoffTimeout", "should match"},
	}
	for i, tc := range cases {
		_, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Create(bg(), newShardMap(ns, "bad-"+string(rune('a'+i)), tc.spec), metav1.CreateOptions{})
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: the error does not name %s (%q): %v", tc.name, tc.field, tc.says, err)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestCRDKeepsShardsImmutableAndAppliesDefaults(t *testing.T) {
	c := clients(t)
	ns := testNamespace(t, c, "sm-crd")
	created, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Create(bg(), newShardMap(ns, "counter", map[string]any{"shards": 10, "rebalanceRate": 1}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a valid ShardMap was refused: %v", err)
	}
	spec := created.Object["spec"].(map[string]any)
	for field, want := range map[string]any{
		"rebalanceInterval": "20s", "rebalanceRetryInterval": "10s", "pingTimeout": "3s",
		"handoffTimeout": "30s", "entityIdleTimeout": "60s", "sendTimeout": "10s",
		"versionLabel": "app.kubernetes.io/version", "maxActiveEntitiesPerPod": int64(0),
	} {
		if spec[field] != want {
			t.Errorf("default of spec.%s: got %v, want %v", field, spec[field], want)
		}
	}
	// An operator running in the cluster may write the ShardMap meanwhile: each change is made on
	// the latest version, again on a conflict.
	update := func(change func(spec map[string]any)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			latest, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Get(bg(), "counter", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(latest.Object["spec"].(map[string]any))
			_, err = c.Dynamic.Resource(shardMapGVR).Namespace(ns).Update(bg(), latest, metav1.UpdateOptions{})
			return err
		})
	}
	err = update(func(spec map[string]any) { spec["shards"] = int64(20) })
	if err == nil || !strings.Contains(err.Error(), "spec.shards") || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing spec.shards: want an error naming spec.shards as immutable, got %v", err)
	} else {
		t.Logf("changing shards: %v", err)
	}
	// Other fields stay editable.
	if err := update(func(spec map[string]any) { spec["rebalanceInterval"] = "5s" }); err != nil {
		t.Errorf("changing rebalanceInterval was refused: %v", err)
	}
}

func TestCRDExplainsItsFieldsAndPrintsColumns(t *testing.T) {
	out, err := kubectl(t, "explain", "shardmap.spec")
	if err != nil {
		t.Fatalf("kubectl explain: %v\n%s", err, out)
	}
	for _, want := range []string{"rebalanceRate", "Largest fraction", "handoffTimeout", "Immutable"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl explain shardmap.spec does not mention %q:\n%s", want, out)
		}
	}
	out, err = kubectl(t, "get", "sm", "-A")
	if err != nil {
		t.Fatalf("kubectl get sm: %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if len(header) > 0 && header[0] == "No" {
		return // no ShardMap in the cluster right now; the columns are checked in the operator test
	}
	for _, col := range []string{"SHARDS", "PODS", "UNASSIGNED", "READY", "LOAD", "AGE"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get sm has no %s column:\n%s", col, out)
		}
	}
}
