package podstate

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	for _, c := range []struct {
		name       string
		conditions []v1.PodCondition
		want       bool
	}{
		{"no conditions", nil, false},
		{"ready", []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}, true},
		{"not ready", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}, false},
		{"scheduled only", []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}, false},
	} {
		p := &v1.Pod{Status: v1.PodStatus{Conditions: c.conditions}}
		if got := Ready(p); got != c.want {
			t.Errorf("%s: Ready = %v, want %v", c.name, got, c.want)
		}
	}
}
