package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var segmentGVR = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmapsegments"}

// storedSize is what the API server stores for the ShardMap: its object, and the segments its
// status names when it is too large for one object (sharding/shard_map_segments.h).
type storedSize struct {
	StatusBytes, ObjectBytes int // the ShardMap's status and whole object, as JSON
	Segments                 int // ShardMapSegments the status names
	LargestSegment           int // the largest of them, whole object as JSON
	WholeStatusBytes         int // the status with the segments' pods and assignments put back
}

// wholeMap answers `sm` with a segmented status put back together: the pods and assignments
// of every segment it names, in order, and its unassigned parts joined. Inline maps are
// answered as they are.
func wholeMap(ctx context.Context, dc dynamic.Interface, sm *unstructured.Unstructured) (*unstructured.Unstructured, storedSize, error) {
	var size storedSize
	status, _ := json.Marshal(sm.Object["status"])
	object, _ := json.Marshal(sm.Object)
	size.StatusBytes, size.ObjectBytes, size.WholeStatusBytes = len(status), len(object), len(status)
	refs, _, _ := unstructured.NestedSlice(sm.Object, "status", "segments")
	if len(refs) == 0 {
		return sm, size, nil
	}
	out := sm.DeepCopy()
	st := out.Object["status"].(map[string]interface{})
	var pods, assignments []interface{}
	var unassigned []string
	for _, r := range refs {
		name, _, _ := unstructured.NestedString(r.(map[string]interface{}), "name")
		seg, err := dc.Resource(segmentGVR).Namespace(sm.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, size, fmt.Errorf("ShardMapSegment %s: %w", name, err)
		}
		whole, _ := json.Marshal(seg.Object)
		size.Segments++
		size.LargestSegment = max(size.LargestSegment, len(whole))
		text, _, _ := unstructured.NestedString(seg.Object, "data")
		// As the API client decodes: integers as int64, which unstructured's accessors expect
		// (util/json converts them only for a map or slice target).
		data := map[string]interface{}{}
		if err := utiljson.Unmarshal([]byte(text), &data); err != nil {
			return nil, size, fmt.Errorf("ShardMapSegment %s: %w", name, err)
		}
		p, _, _ := unstructured.NestedSlice(data, "pods")
		a, _, _ := unstructured.NestedSlice(data, "assignments")
		pods, assignments = append(pods, p...), append(assignments, a...)
		if u, _, _ := unstructured.NestedString(data, "unassigned"); u != "" {
			unassigned = append(unassigned, u)
		}
	}
	delete(st, "segments")
	st["pods"], st["assignments"], st["unassigned"] = pods, assignments, strings.Join(unassigned, ",")
	whole, _ := json.Marshal(st)
	size.WholeStatusBytes = len(whole)
	return out, size, nil
}
