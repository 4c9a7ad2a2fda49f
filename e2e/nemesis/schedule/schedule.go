// Package schedule draws the nemesis's fault schedule from a seed: which faults of the fault
// model (docs/reliability.md) come in which order, whom they hit, how long each lasts and the
// pauses between them. It is pure: the same seed gives the same schedule, and a longer duration
// gives the same schedule with more steps at its end, so that a failing run replays with its seed.
//
// A schedule is a list of steps. A step is one fault, or two faults on two different pods that
// overlap (the second starts while the first holds); it ends when its faults are healed and the
// service has recovered, then the step's gap passes before the next one. Faults that act on the
// whole cluster (the API server, the operator's leader, the Deployment) always come alone.
package schedule

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a fault of the fault model.
type Kind string

// The faults. Pod faults hit one counter pod; the others act on the cluster.
const (
	KillApp           Kind = "kill-app"           // SIGKILL of the app container (OOM, crash)
	KillSidecar       Kind = "kill-sidecar"       // SIGKILL of the kshard-sidecar container
	FreezeApp         Kind = "freeze-app"         // cgroup.freeze of the app for Hold, then thaw
	FreezeSidecar     Kind = "freeze-sidecar"     // cgroup.freeze of the sidecar for Hold, then thaw
	PartitionAPI      Kind = "partition-api"      // the pod cut off from the API server for Hold
	PartitionOperator Kind = "partition-operator" // the pod cut off from the operator pods for Hold
	PartitionPeers    Kind = "partition-peers"    // the pod cut off from the other counter pods for Hold
	PartitionControl  Kind = "partition-control"  // from the API server and the operators: a cut-off node
	ForceDelete       Kind = "force-delete"       // cut off, force-deleted while it runs, released after Hold
	DeleteLeader      Kind = "delete-leader"      // the leading operator pod deleted
	APIServerRestart  Kind = "apiserver-restart"  // the API server stopped, down for Hold, started
	ScaleUp           Kind = "scale-up"           // the Deployment scaled to Replicas, back to 3 after Hold
	ScaleDown         Kind = "scale-down"         // likewise, down
	Rollout           Kind = "rollout"            // a new version label, rolled out completely
	Rollback          Kind = "rollback"           // a new version label, reverted after Hold, mid-rollout
)

// Kinds lists every fault, pod faults first.
var Kinds = []Kind{KillApp, KillSidecar, FreezeApp, FreezeSidecar, PartitionAPI, PartitionOperator,
	PartitionPeers, PartitionControl, ForceDelete, DeleteLeader, APIServerRestart, ScaleUp, ScaleDown,
	Rollout, Rollback}

// PodFault says whether the fault hits one counter pod (and may overlap another pod fault).
func (k Kind) PodFault() bool {
	switch k {
	case KillApp, KillSidecar, FreezeApp, FreezeSidecar, PartitionAPI, PartitionOperator,
		PartitionPeers, PartitionControl, ForceDelete:
		return true
	}
	return false
}

// BaseReplicas is the counter Deployment's size between faults.
const BaseReplicas = 3

// Fault is one fault of a step.
type Fault struct {
	Kind Kind
	// Target picks the pod of a pod fault: the Target-th (modulo their number) of the serving
	// counter pods sorted by name, leaving out the pods the step's other fault hit.
	Target int
	// Offset from the step's start.
	Offset time.Duration
	// Hold: how long the fault lasts before it is healed (see each Kind); 0 for kills and the
	// leader's deletion, which heal by themselves.
	Hold time.Duration
	// Replicas of a scale.
	Replicas int
}

// Step is one fault or two overlapping pod faults, then a pause.
type Step struct {
	Faults []Fault
	Gap    time.Duration
}

// Schedule is what a seed and a duration give.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Steps    []Step
}

// holds: the range of Hold per kind, the estimate of how long the fault takes beyond its Hold
// (for the schedule's length only; the run waits for the real thing).
var holds = map[Kind]struct{ min, max, extra time.Duration }{
	KillApp:           {0, 0, 5 * time.Second},
	KillSidecar:       {0, 0, 8 * time.Second},
	FreezeApp:         {3 * time.Second, 20 * time.Second, 3 * time.Second},
	FreezeSidecar:     {3 * time.Second, 25 * time.Second, 8 * time.Second},
	PartitionAPI:      {5 * time.Second, 40 * time.Second, 2 * time.Second},
	PartitionOperator: {5 * time.Second, 40 * time.Second, 2 * time.Second},
	PartitionPeers:    {5 * time.Second, 30 * time.Second, 2 * time.Second},
	PartitionControl:  {5 * time.Second, 30 * time.Second, 5 * time.Second},
	ForceDelete:       {5 * time.Second, 40 * time.Second, 20 * time.Second},
	DeleteLeader:      {0, 0, 10 * time.Second},
	APIServerRestart:  {0, 20 * time.Second, 25 * time.Second},
	ScaleUp:           {0, 15 * time.Second, 50 * time.Second},
	ScaleDown:         {0, 15 * time.Second, 40 * time.Second},
	Rollout:           {0, 0, 50 * time.Second},
	Rollback:          {1 * time.Second, 8 * time.Second, 50 * time.Second},
}

// overlapChance is the chance that a pod fault shares its step with the next pod fault.
const overlapChance = 0.35

// Generate draws the schedule of seed for a run of duration: steps until their estimated time
// is twice the duration, since faults often take less than the estimate (the run starts no step
// once the duration is over, and its report says how many ran).
//
// The kinds come from a shuffled deck holding each kind once, drawn to the end before it is
// shuffled again, so that a run of a few minutes meets most faults and a long run every fault
// many times.
func Generate(seed uint64, duration time.Duration) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Schedule{Seed: seed, Duration: duration}
	var deck []Kind
	draw := func() Kind {
		if len(deck) == 0 {
			deck = append(deck, Kinds...)
			r.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		return k
	}
	var total time.Duration
	for total < 2*duration {
		first := newFault(r, draw())
		step := Step{Faults: []Fault{first}}
		length := first.Hold + holds[first.Kind].extra
		if first.Kind.PodFault() && len(deck) > 0 && deck[0].PodFault() && r.Float64() < overlapChance {
			second := newFault(r, draw())
			second.Offset = between(r, 0, first.Hold+time.Second)
			step.Faults = append(step.Faults, second)
			length = max(length, second.Offset+second.Hold+holds[second.Kind].extra)
		}
		step.Gap = between(r, 3*time.Second, 15*time.Second)
		s.Steps = append(s.Steps, step)
		total += length + step.Gap
	}
	return s
}

func newFault(r *rand.Rand, k Kind) Fault {
	h := holds[k]
	f := Fault{Kind: k, Target: r.IntN(1000), Hold: between(r, h.min, h.max)}
	switch k {
	case ScaleUp:
		f.Replicas = BaseReplicas + 1 + r.IntN(2)
	case ScaleDown:
		f.Replicas = BaseReplicas - 1
	}
	return f
}

// between draws a duration in [lo, hi], to the tenth of a second.
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	tenths := int64((hi - lo) / (100 * time.Millisecond))
	return lo + time.Duration(r.Int64N(tenths+1))*100*time.Millisecond
}

// String describes a fault: "freeze-app of pod #412 for 7.3s".
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Kind.PodFault() {
		fmt.Fprintf(&b, " of pod #%d", f.Target)
	}
	if f.Replicas > 0 {
		fmt.Fprintf(&b, " to %d replicas", f.Replicas)
	}
	if f.Hold > 0 {
		fmt.Fprintf(&b, " for %s", f.Hold)
	}
	if f.Offset > 0 {
		fmt.Fprintf(&b, " (starting %s into the step)", f.Offset)
	}
	return b.String()
}

// String is the schedule as the run prints it: one line per step.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule of seed %d for %s: %d steps\n", s.Seed, s.Duration, len(s.Steps))
	for i, st := range s.Steps {
		parts := make([]string, len(st.Faults))
		for j, f := range st.Faults {
			parts[j] = f.String()
		}
		fmt.Fprintf(&b, "  %3d. %s; then %s\n", i+1, strings.Join(parts, " + "), st.Gap)
	}
	return b.String()
}
