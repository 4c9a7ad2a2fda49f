// Package shardmap reads kshard's ShardMap resource (kshard.io/v1alpha1, crds/shardmap.yaml) the
// way a user sees it: who owns which shard, the registered pods and the conditions. History
// records every version of the status seen by a watch, so that a scenario can count how often
// each shard changed owner over a period.
package shardmap

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kshard.local/e2e/support/shards"
)

// Resource is the ShardMap's group, version and resource.
var Resource = schema.GroupVersionResource{Group: "kshard.io", Version: "v1alpha1", Resource: "shardmaps"}

// Pod is one entry of status.pods.
type Pod struct {
	Name    string `json:"name"`
	UID     string `json:"uid"`
	Address string `json:"address"`
	Version string `json:"version"`
	Shards  int    `json:"shards"`
	// Load is the load of its shards as its sidecar last measured it; nil before any report.
	Load *float64 `json:"load"`
}

// HotShard is one entry of status.load.hottest.
type HotShard struct {
	Shard int     `json:"shard"`
	Pod   string  `json:"pod"`
	Load  float64 `json:"load"`
}

// Load is status.load: the measured load over the registered pods.
type Load struct {
	PeakToMean float64    `json:"peakToMean"`
	Bound      float64    `json:"bound"`
	Total      float64    `json:"total"`
	Hottest    []HotShard `json:"hottest"`
}

// Assignment is one entry of status.assignments: shards (range form) owned by a pod since epoch.
type Assignment struct {
	Pod    string `json:"pod"`
	Epoch  int64  `json:"epoch"`
	Shards string `json:"shards"`
}

// Condition is a metav1.Condition of the status.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
}

// Manager is status.manager: the leading operator replica.
type Manager struct {
	Pod     string `json:"pod"`
	Address string `json:"address"`
}

// Status is the ShardMap's status.
type Status struct {
	ObservedGeneration int64        `json:"observedGeneration"`
	Epoch              int64        `json:"epoch"`
	Manager            Manager      `json:"manager"`
	Pods               []Pod        `json:"pods"`
	Assignments        []Assignment `json:"assignments"`
	Unassigned         string       `json:"unassigned"`
	PodCount           int          `json:"podCount"`
	UnassignedCount    int          `json:"unassignedCount"`
	Conditions         []Condition  `json:"conditions"`
	Load               *Load        `json:"load"`
}

// ShardMap is the part of the resource the scenarios read.
type ShardMap struct {
	Name            string
	Generation      int64
	ResourceVersion string
	Shards          int
	Status          Status
	// Owners[s-1] is the pod owning shard s, "" when unassigned.
	Owners []string
}

// FromUnstructured decodes a ShardMap and resolves its assignments into per-shard owners.
func FromUnstructured(u *unstructured.Unstructured) (*ShardMap, error) {
	count, _, err := unstructured.NestedInt64(u.Object, "spec", "shards")
	if err != nil {
		return nil, fmt.Errorf("spec.shards: %w", err)
	}
	m := &ShardMap{Name: u.GetName(), Generation: u.GetGeneration(),
		ResourceVersion: u.GetResourceVersion(), Shards: int(count)}
	if raw, ok := u.Object["status"]; ok {
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &m.Status); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
	}
	m.Owners = make([]string, m.Shards)
	for _, a := range m.Status.Assignments {
		ids, err := shards.Parse(a.Shards)
		if err != nil {
			return nil, fmt.Errorf("status.assignments of %s: %w", a.Pod, err)
		}
		for _, s := range ids {
			if s < 1 || s > m.Shards {
				return nil, fmt.Errorf("status.assignments of %s: shard %d outside 1..%d", a.Pod, s, m.Shards)
			}
			if m.Owners[s-1] != "" {
				return nil, fmt.Errorf("status.assignments: shard %d owned by both %s and %s", s, m.Owners[s-1], a.Pod)
			}
			m.Owners[s-1] = a.Pod
		}
	}
	return m, nil
}

// Condition returns the condition of that type, if any.
func (m *ShardMap) Condition(kind string) (Condition, bool) {
	for _, c := range m.Status.Conditions {
		if c.Type == kind {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue says whether the condition of that type is True.
func (m *ShardMap) IsTrue(kind string) bool {
	c, ok := m.Condition(kind)
	return ok && c.Status == "True"
}

// Counts is the number of shards each owner holds, from the assignments (owners with none are
// absent; use the pod list for them).
func (m *ShardMap) Counts() map[string]int {
	out := map[string]int{}
	for _, o := range m.Owners {
		if o != "" {
			out[o]++
		}
	}
	return out
}

// Unassigned is how many shards have no owner.
func (m *ShardMap) Unassigned() int {
	n := 0
	for _, o := range m.Owners {
		if o == "" {
			n++
		}
	}
	return n
}

// Spread is the shard count of each registered pod (sorted, for messages) and max-min.
func (m *ShardMap) Spread() (counts []int, diff int) {
	c := m.Counts()
	for _, p := range m.Status.Pods {
		counts = append(counts, c[p.Name])
	}
	sort.Ints(counts)
	if len(counts) == 0 {
		return counts, 0
	}
	return counts, counts[len(counts)-1] - counts[0]
}

// Describe is a one-line summary for progress and failure messages.
func (m *ShardMap) Describe() string {
	var conds []string
	for _, c := range m.Status.Conditions {
		conds = append(conds, c.Type+"="+c.Status)
	}
	c := m.Counts()
	var pods []string
	for _, p := range m.Status.Pods {
		pods = append(pods, fmt.Sprintf("%s(v%s)=%d", p.Name, p.Version, c[p.Name]))
	}
	return fmt.Sprintf("epoch %d, pods [%s], unassigned %d, conditions [%s], manager %s",
		m.Status.Epoch, strings.Join(pods, " "), m.Unassigned(), strings.Join(conds, " "), m.Status.Manager.Pod)
}

// Balanced says whether the map has exactly `pods` registered pods, every shard assigned, and
// shard counts that differ by at most one; the message says what is off.
func (m *ShardMap) Balanced(pods int) (bool, string) {
	counts, diff := m.Spread()
	ok := len(m.Status.Pods) == pods && m.Unassigned() == 0 && diff <= 1
	return ok, fmt.Sprintf("want %d pods within one; shards per pod %v; %s", pods, counts, m.Describe())
}

// Registered lists the names of the registered pods (status.pods), sorted.
func (m *ShardMap) Registered() []string {
	var out []string
	for _, p := range m.Status.Pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}
