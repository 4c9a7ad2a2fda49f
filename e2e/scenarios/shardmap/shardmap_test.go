package shardmap

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func mapOf(t *testing.T, rv string, epoch int64, assignments ...Assignment) *ShardMap {
	t.Helper()
	var as []any
	for _, a := range assignments {
		as = append(as, map[string]any{"pod": a.Pod, "epoch": a.Epoch, "shards": a.Shards})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "m", "resourceVersion": rv},
		"spec":     map[string]any{"shards": int64(6)},
		"status":   map[string]any{"epoch": epoch, "assignments": as},
	}}
	m, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOwnersAndDoubleOwnership(t *testing.T) {
	m := mapOf(t, "1", 3, Assignment{"a", 1, "1-3"}, Assignment{"b", 2, "5"})
	if !reflect.DeepEqual(m.Owners, []string{"a", "a", "a", "", "b", ""}) || m.Unassigned() != 2 {
		t.Fatalf("owners %v", m.Owners)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"shards": int64(6)},
		"status": map[string]any{"assignments": []any{
			map[string]any{"pod": "a", "epoch": int64(1), "shards": "1-2"},
			map[string]any{"pod": "b", "epoch": int64(1), "shards": "2"}}},
	}}
	if _, err := FromUnstructured(u); err == nil {
		t.Fatal("a shard owned by two pods was accepted")
	}
}

func TestMovesCountOwnerChangesThroughUnassigned(t *testing.T) {
	h := NewHistory()
	t0 := time.Unix(1000, 0)
	h.Add(t0, mapOf(t, "1", 1, Assignment{"a", 1, "1-6"}))
	// Window starts here: shard 1 and 2 go to b via unassigned, shard 3 goes away and comes back.
	h.Add(t0.Add(2*time.Second), mapOf(t, "2", 2, Assignment{"a", 1, "4-6"}))
	h.Add(t0.Add(3*time.Second), mapOf(t, "3", 3, Assignment{"a", 1, "3-6"}, Assignment{"b", 3, "1-2"}))
	h.Add(t0.Add(3*time.Second), mapOf(t, "3", 3, Assignment{"a", 1, "3-6"}, Assignment{"b", 3, "1-2"}))
	h.Add(t0.Add(4*time.Second), mapOf(t, "4", 4, Assignment{"a", 1, "3-6"}, Assignment{"c", 4, "1"}, Assignment{"b", 3, "2"}))
	mv := h.Moves(t0.Add(time.Second), t0.Add(10*time.Second))
	if !reflect.DeepEqual(mv.PerShard, []int{2, 1, 0, 0, 0, 0}) || mv.Total != 3 || mv.Max != 2 ||
		mv.ShardsMoved != 2 || mv.Versions != 3 || mv.EpochStart != 1 || mv.EpochEnd != 4 {
		t.Fatalf("moves %+v", mv)
	}
	if mv := h.Moves(t0.Add(3*time.Second), t0.Add(10*time.Second)); mv.Total != 1 || mv.PerShard[0] != 1 {
		t.Fatalf("moves after t0+3s %+v", mv)
	}
}

func TestBetweenReturnsTheVersionsOfAPeriod(t *testing.T) {
	h := NewHistory()
	t0 := time.Unix(1000, 0)
	for i, rv := range []string{"1", "2", "3"} {
		h.Add(t0.Add(time.Duration(i)*time.Second), mapOf(t, rv, int64(i), Assignment{Pod: "a", Shards: "1-6"}))
	}
	got := h.Between(t0.Add(time.Second), t0.Add(2*time.Second))
	if len(got) != 2 || got[0].Map.ResourceVersion != "2" || got[1].Map.ResourceVersion != "3" {
		t.Fatalf("got %d versions", len(got))
	}
	if len(h.Between(t0.Add(3*time.Second), t0.Add(4*time.Second))) != 0 {
		t.Fatal("a version after the period")
	}
}
