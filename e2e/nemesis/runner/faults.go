package runner

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"kshard.local/e2e/cluster/fault"
	"kshard.local/e2e/nemesis/schedule"
	"kshard.local/e2e/scenarios/load"
)

// FaultRecord is what became of one fault of the schedule.
type FaultRecord struct {
	Step int           `json:"step"`
	Kind schedule.Kind `json:"kind"`
	Plan string        `json:"plan"`
	// Target: the pod hit, or what the fault acted on.
	Target   string    `json:"target,omitempty"`
	Injected time.Time `json:"injected"`
	Healed   time.Time `json:"healed"`
	// Recovered: every shard answered a read after the step's faults were healed (zero: not
	// within the deadline); StepHealed: when the last fault of the step was healed.
	Recovered  time.Time `json:"recovered"`
	StepHealed time.Time `json:"stepHealed"`
	// Overlapping: the step had two faults.
	Overlapping bool     `json:"overlapping,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	// Error: the fault could not be injected, or not healed, as planned.
	Error string `json:"error,omitempty"`

	mu sync.Mutex
}

func (f *FaultRecord) note(format string, args ...any) {
	f.mu.Lock()
	f.Notes = append(f.Notes, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// Recovery is heal → recovered, or -1 when service did not recover in time. The heal of
// overlapping faults is the later one: service is measured for the step as a whole.
func (f *FaultRecord) Recovery() time.Duration {
	if f.Recovered.IsZero() || f.StepHealed.IsZero() {
		return -1
	}
	return f.Recovered.Sub(f.StepHealed)
}

// fails records an error of the fault; it returns whether there was one.
func (f *FaultRecord) fails(err error) bool {
	if err == nil {
		return false
	}
	f.mu.Lock()
	if f.Error != "" {
		f.Error += "; "
	}
	f.Error += err.Error()
	f.mu.Unlock()
	return true
}

// inject runs one fault from its injection to its heal.
func (r *run) inject(f schedule.Fault, rec *FaultRecord) {
	switch f.Kind {
	case schedule.KillApp:
		r.podFault(f, rec, func(p *fault.Pod) error { return stamp(rec, func() error { return p.Kill(appContainer) }) })
	case schedule.KillSidecar:
		r.podFault(f, rec, func(p *fault.Pod) error { return stamp(rec, func() error { return p.Kill(sidecarName) }) })
	case schedule.FreezeApp:
		r.podFault(f, rec, func(p *fault.Pod) error { return freeze(p, appContainer, f.Hold, rec) })
	case schedule.FreezeSidecar:
		r.podFault(f, rec, func(p *fault.Pod) error { return freeze(p, sidecarName, f.Hold, rec) })
	case schedule.PartitionAPI, schedule.PartitionOperator, schedule.PartitionPeers, schedule.PartitionControl:
		r.podFault(f, rec, func(p *fault.Pod) error { return r.partition(p, rec.Target, f, rec) })
	case schedule.ForceDelete:
		r.podFault(f, rec, func(p *fault.Pod) error { return r.forceDelete(p, rec.Target, f.Hold, rec) })
	case schedule.DeleteLeader:
		rec.fails(r.deleteLeader(rec))
	case schedule.APIServerRestart:
		rec.fails(r.restartAPIServer(f.Hold, rec))
	case schedule.ScaleUp, schedule.ScaleDown:
		rec.fails(r.scaleAndBack(f.Replicas, f.Hold, rec))
	case schedule.Rollout:
		rec.fails(r.rollout(rec))
	case schedule.Rollback:
		rec.fails(r.rollback(f.Hold, rec))
	default:
		rec.fails(fmt.Errorf("unknown fault %q", f.Kind))
	}
}

// stamp runs an instantaneous fault: injected before it, healed once it returned; when it failed
// nothing happened, and the fault counts as skipped (no injection time).
func stamp(rec *FaultRecord, do func() error) error {
	t := time.Now()
	if err := do(); err != nil {
		return fmt.Errorf("skipped: %w", err)
	}
	rec.Injected, rec.Healed = t, time.Now()
	return nil
}

// podFault picks the fault's pod among the serving counter pods no fault of the step has hit, and
// runs the fault on it.
func (r *run) podFault(f schedule.Fault, rec *FaultRecord, do func(*fault.Pod) error) {
	p, err := r.choosePod(f.Target)
	if rec.fails(err) {
		return
	}
	rec.Target = p.Name
	rec.fails(do(p))
}

func (r *run) choosePod(target int) (*fault.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var candidates []load.Pod
	for _, p := range r.pods.Ready() {
		if !r.busy[p.Name] {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return nil, errors.New("skipped: no serving counter pod to hit")
	}
	name := candidates[target%len(candidates)].Name
	p, err := r.node.Pod(r.cfg.CounterNS, name)
	if err != nil {
		return nil, fmt.Errorf("skipped: %w", err)
	}
	r.busy[name] = true
	return p, nil
}

// newStep frees the pods the previous step's faults hit.
func (r *run) newStep() {
	r.mu.Lock()
	r.busy = map[string]bool{}
	r.mu.Unlock()
}

// freeze freezes a container for hold, then thaws it (a restarted container starts thawed: the
// kubelet restarts a sidecar frozen past its liveness probe's failures).
func freeze(p *fault.Pod, container string, hold time.Duration, rec *FaultRecord) error {
	t := time.Now()
	if err := p.Freeze(container); err != nil {
		return fmt.Errorf("skipped: %w", errors.Join(err, p.Thaw(container)))
	}
	rec.Injected = t
	time.Sleep(hold)
	err := p.Thaw(container)
	rec.Healed = time.Now()
	return err
}

// partitionTargets are what a partition of kind k cuts the pod named pod off from.
func (r *run) partitionTargets(k schedule.Kind, pod string) ([]fault.Target, error) {
	var ips []string
	if k == schedule.PartitionOperator || k == schedule.PartitionControl || k == schedule.ForceDelete {
		ops, err := r.operatorIPs()
		if err != nil {
			return nil, err
		}
		ips = append(ips, ops...)
	}
	if k == schedule.PartitionPeers {
		ips = r.peerIPs(pod)
	}
	out, err := targets(ips)
	if err != nil {
		return nil, err
	}
	if k == schedule.PartitionAPI || k == schedule.PartitionControl || k == schedule.ForceDelete {
		out = append(out, fault.APIServer())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("skipped: %s of %s has nothing to cut it from", k, pod)
	}
	return out, nil
}

func (r *run) partition(p *fault.Pod, name string, f schedule.Fault, rec *FaultRecord) error {
	ts, err := r.partitionTargets(f.Kind, name)
	if err != nil {
		return err
	}
	rec.note("cut off from %v", ts)
	t := time.Now()
	if err := p.Partition(ts); err != nil {
		return fmt.Errorf("skipped: %w", errors.Join(err, p.Heal()))
	}
	rec.Injected = t
	time.Sleep(f.Hold)
	err = p.Heal()
	rec.Healed = time.Now()
	return err
}

// forceDelete models a node cut off from the control plane whose pod is force-deleted: the pod's
// processes keep running (orphan), cut off from the API server and the operator, while its object
// is deleted without grace; after hold the "node" reconnects, and its kubelet kills them.
func (r *run) forceDelete(p *fault.Pod, name string, hold time.Duration, rec *FaultRecord) error {
	ts, err := r.partitionTargets(schedule.ForceDelete, name)
	if err != nil {
		return err
	}
	t := time.Now()
	if err := p.Orphan(); err != nil {
		return fmt.Errorf("skipped: %w", err)
	}
	rec.Injected = t
	if err := p.Partition(ts); err != nil {
		return errors.Join(err, p.Heal(), p.Release())
	}
	zero := int64(0)
	if err := r.deletePod(r.cfg.CounterNS, name, p.UID, &zero); err != nil {
		return errors.Join(fmt.Errorf("force delete: %w", err), p.Heal(), p.Release())
	}
	rec.note("force-deleted %s (uid %s) at %s; its processes run on, cut off", name, p.UID, clock(time.Now()))
	time.Sleep(hold)
	if err := p.Release(); err != nil {
		return err
	}
	// Release returned once the processes were gone: none of them did anything after this.
	released := time.Now()
	r.mu.Lock()
	r.releases[name] = append(r.releases[name], released)
	r.mu.Unlock()
	rec.Healed = released
	rec.note("released (its processes killed) at %s", clock(released))
	return nil
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
