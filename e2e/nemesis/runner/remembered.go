package runner

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/shardmap"
)

// rememberedType is the entity type the run makes remembered: its counters are then started
// again, without a message, on the next owner of their shard after every move and crash the
// faults cause, and the activation check covers those starts as it covers the activations by
// message.
const rememberedType = "counter"

// rememberCounters makes the counter's ShardMap remember counters for the run (the spec's other
// remembered types kept) and returns the merge patch that puts the field back as it was.
func (e *env) rememberCounters() (restore []byte, err error) {
	ctx, cancel := kube.Ctx()
	defer cancel()
	maps := e.dyn.Resource(shardmap.Resource).Namespace(e.cfg.CounterNS)
	m, err := maps.Get(ctx, e.cfg.CounterName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the ShardMap: %w", err)
	}
	before, found, err := unstructured.NestedStringSlice(m.Object, "spec", "rememberedEntityTypes")
	if err != nil {
		return nil, fmt.Errorf("the ShardMap's spec.rememberedEntityTypes: %w", err)
	}
	var old any // null removes the field: the CRD's default (none)
	if found {
		old = before
	}
	if restore, err = specPatch("rememberedEntityTypes", old); err != nil {
		return nil, err
	}
	types := append([]string{}, before...)
	if !slices.Contains(types, rememberedType) {
		types = append(types, rememberedType)
	}
	patch, err := specPatch("rememberedEntityTypes", types)
	if err != nil {
		return nil, err
	}
	if err := e.patchMap(patch); err != nil {
		return nil, err
	}
	logf("the ShardMap remembers %v for the run", types)
	return restore, nil
}

func (e *env) patchMap(patch []byte) error {
	ctx, cancel := kube.Ctx()
	defer cancel()
	_, err := e.dyn.Resource(shardmap.Resource).Namespace(e.cfg.CounterNS).Patch(ctx, e.cfg.CounterName,
		types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching the ShardMap with %s: %w", patch, err)
	}
	return nil
}

func specPatch(field string, value any) ([]byte, error) {
	return json.Marshal(map[string]any{"spec": map[string]any{field: value}})
}
