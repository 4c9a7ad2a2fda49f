package operatortest

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// segmentNames lists the ShardMapSegments of map `sm`, and those its stored status names.
func segmentNames(t *testing.T, c clusterClients, ns, sm string) (listed, named []string) {
	t.Helper()
	list, err := c.Dynamic.Resource(segmentGVR).Namespace(ns).List(bg(), metav1.ListOptions{LabelSelector: "kshard.io/shard-map=" + sm})
	if err != nil {
		t.Fatalf("list ShardMapSegments: %v", err)
	}
	for _, s := range list.Items {
		listed = append(listed, s.GetName())
	}
	st, err := getStatus(t, c, ns, sm)
	if err != nil {
		t.Fatalf("read the ShardMap: %v", err)
	}
	for _, ref := range st.Segments {
		named = append(named, ref.Name)
	}
	sort.Strings(listed)
	sort.Strings(named)
	return listed, named
}

// A status over --status-inline-bytes is stored in ShardMapSegments on the real API server: the
// CRD takes them, the map converges and survives a change of leader, segments no status names
// go after the grace period, and deleting the map deletes its segments (owner references).
func TestALargeStatusIsStoredInSegments(t *testing.T) {
	c := clients(t)
	const sm = "counter"
	ns, created, ops := twoReplicas(t, c, "op-seg", sm, "--status-inline-bytes=1024")
	managers := []string{ops["op-a"].manager, ops["op-b"].manager}
	if _, err := c.Clientset.AppsV1().Deployments(ns).Create(bg(), stubDeployment(sm, sm, "1.0.0", 3, managers), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, "3 pods share the shards, read through the segments", func() (bool, string) {
		return converged(t, c, ns, sm, 3)
	})

	// The stored object keeps the head; the bulk is in segments owned by the map.
	obj, err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Get(bg(), sm, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := obj.Object["status"].(map[string]any)
	if pods, _ := status["pods"].([]any); len(pods) != 0 {
		t.Errorf("a status over 1024 bytes still carries its pods inline")
	}
	if a, _ := status["assignments"].([]any); len(a) != 1 || a[0].(map[string]any)["pod"] != "kshard.io/segmented" {
		t.Errorf("the stub does not fail closed: %v", status["assignments"])
	}
	listed, named := segmentNames(t, c, ns, sm)
	if len(named) == 0 {
		t.Fatalf("the status names no segments: %v", status)
	}
	for _, name := range named {
		seg, err := c.Dynamic.Resource(segmentGVR).Namespace(ns).Get(bg(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("a named segment is missing: %v", err)
		}
		owners := seg.GetOwnerReferences()
		if len(owners) != 1 || owners[0].UID != created.GetUID() || owners[0].Kind != "ShardMap" {
			t.Errorf("segment %s is not owned by its ShardMap: %+v", name, owners)
		}
	}
	out, err := kubectl(t, "get", "shardmaps", "-n", ns)
	if err != nil || !strings.Contains(strings.Join(strings.Fields(out), " "), sm+" 60 3 0 True") {
		t.Errorf("kubectl get shardmaps does not show the map's counts from its head:\n%s %v", out, err)
	}
	t.Logf("segments listed %v, named %v", listed, named)

	// A new leader reads the map whole from its segments and moves nothing.
	handOver(t, c, ns, sm, ops, syscall.SIGKILL, leaseDuration+retryPeriod*6/5+2*time.Second)

	// A fourth pod: new versions, new segments; the replaced ones go after the grace (30 s).
	scale(t, c, ns, sm, 4)
	waitFor(t, 120*time.Second, "4 pods share the shards", func() (bool, string) {
		return converged(t, c, ns, sm, 4)
	})
	waitFor(t, 90*time.Second, "only the segments the status names are left", func() (bool, string) {
		listed, named := segmentNames(t, c, ns, sm)
		return fmt.Sprint(listed) == fmt.Sprint(named), fmt.Sprintf("listed %v, named %v", listed, named)
	})

	// Deleting the map deletes its segments (the garbage collector follows owner references).
	for _, op := range ops {
		select {
		case <-op.exited:
		default:
			op.stop(t, syscall.SIGTERM)
		}
	}
	if err := c.Dynamic.Resource(shardMapGVR).Namespace(ns).Delete(bg(), sm, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the deleted map's segments are gone", func() (bool, string) {
		list, err := c.Dynamic.Resource(segmentGVR).Namespace(ns).List(bg(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})
}
