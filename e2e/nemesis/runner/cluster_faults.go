package runner

import (
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"kshard.local/e2e/nemesis/schedule"
	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/support/wait"
)

// Deadlines of the cluster faults' own steps (the run fails later if the system does not settle).
const (
	leaderDeadline  = 2 * time.Minute
	rolloutDeadline = 6 * time.Minute
)

// deleteLeader deletes the pod holding the operator's Lease (gracefully, as an eviction or a
// node drain would) and notes how long until another replica holds it.
func (r *run) deleteLeader(rec *FaultRecord) error {
	l, err := r.lease()
	if err != nil {
		return fmt.Errorf("skipped: the operator's Lease: %w", err)
	}
	old := kube.Holder(l)
	if old == "" {
		return fmt.Errorf("skipped: Lease %s/%s has no holder", r.cfg.KshardNS, leaseName)
	}
	rec.Target = old
	err = stamp(rec, func() error { return r.deletePod(r.cfg.KshardNS, old, "", nil) })
	if err != nil {
		return err
	}
	took, err := wait.Until(leaderDeadline, 200*time.Millisecond, func() (bool, string) {
		l, err := r.lease()
		if err != nil {
			return false, err.Error()
		}
		h := kube.Holder(l)
		return h != "" && h != old, "holder " + h
	})
	if err != nil {
		return fmt.Errorf("no new leader: %w", err)
	}
	rec.note("a new replica holds the Lease %s after the deletion", secs(took))
	return nil
}

// restartAPIServer stops the API server, leaves it down for hold and starts it again; then it
// makes sure the webhook's Endpoints came back (kube.ResyncServiceEndpoints).
func (r *run) restartAPIServer(hold time.Duration, rec *FaultRecord) error {
	rec.Target = "kube-apiserver"
	rec.Injected = time.Now()
	stopErr := r.script(3*time.Minute, "apiserver.sh", "stop")
	stopped := time.Now()
	time.Sleep(hold)
	startErr := r.script(3*time.Minute, "apiserver.sh", "start")
	rec.Healed = time.Now()
	rec.note("stop took %s, down %s", secs(stopped.Sub(rec.Injected)), secs(rec.Healed.Sub(stopped)))
	if stopErr != nil || startErr != nil {
		return fmt.Errorf("apiserver.sh: stop: %v; start: %v", stopErr, startErr)
	}
	note := func(msg string) { rec.note("%s", msg) }
	return kube.ResyncServiceEndpoints(r.cs, r.cfg.KshardNS, 2*time.Minute, note)
}

// scaleAndBack scales the counter Deployment to replicas, waits until the new pods serve and are
// registered (or the old ones are gone), holds, and scales back to schedule.BaseReplicas.
func (r *run) scaleAndBack(replicas int, hold time.Duration, rec *FaultRecord) error {
	rec.Target = fmt.Sprintf("deployment %s: %d → %d → %d", r.cfg.CounterName, schedule.BaseReplicas, replicas, schedule.BaseReplicas)
	rec.Injected = time.Now()
	if err := r.scale(replicas); err != nil {
		return err
	}
	took, err := wait.Until(rolloutDeadline, 500*time.Millisecond, func() (bool, string) {
		return r.podsOn(r.version, replicas)
	})
	if err != nil {
		return fmt.Errorf("scaled to %d: %w", replicas, err)
	}
	rec.note("%d pods serving and registered after %s", replicas, secs(took))
	time.Sleep(hold)
	return r.scaleBack(rec)
}

func (r *run) scaleBack(rec *FaultRecord) error {
	defer func() { rec.Healed = time.Now() }()
	if err := r.scale(schedule.BaseReplicas); err != nil {
		return err
	}
	if _, err := wait.Until(rolloutDeadline, 500*time.Millisecond, func() (bool, string) {
		return r.podsOn(r.version, schedule.BaseReplicas)
	}); err != nil {
		return fmt.Errorf("scaled back to %d: %w", schedule.BaseReplicas, err)
	}
	return nil
}

func (r *run) scale(replicas int) error {
	ctx, cancel := kube.Ctx()
	defer cancel()
	_, err := r.cs.AppsV1().Deployments(r.cfg.CounterNS).UpdateScale(ctx, r.cfg.CounterName,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.CounterName, Namespace: r.cfg.CounterNS},
			Spec: autoscalingv1.ScaleSpec{Replicas: int32(replicas)}}, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("scaling deployment %s to %d: %w", r.cfg.CounterName, replicas, err)
	}
	return nil
}

// rollout changes the pod template's version label to a new version and waits until every pod
// runs it.
func (r *run) rollout(rec *FaultRecord) error {
	from, to := r.version, r.nextVersion()
	rec.Target = fmt.Sprintf("deployment %s: %s → %s", r.cfg.CounterName, from, to)
	rec.Injected = time.Now()
	err := r.rollTo(to)
	rec.Healed = time.Now()
	return err
}

// rollback starts a rollout to a new version and, hold later while it is under way, reverts the
// template to the version before (kubectl rollout undo), then waits until every pod runs that.
func (r *run) rollback(hold time.Duration, rec *FaultRecord) error {
	from, to := r.version, r.nextVersion()
	rec.Target = fmt.Sprintf("deployment %s: %s → %s, back to %s", r.cfg.CounterName, from, to, from)
	rec.Injected = time.Now()
	defer func() { rec.Healed = time.Now() }()
	if err := r.setVersion(to); err != nil {
		return err
	}
	time.Sleep(hold)
	if ok, _ := r.podsOn(to, schedule.BaseReplicas); ok {
		rec.note("the rollout to %s was complete before the rollback", to)
	}
	return r.rollTo(from)
}

func (r *run) nextVersion() string {
	r.versions++
	return fmt.Sprintf("1.%d.0", r.versions)
}

func (r *run) rollTo(version string) error {
	if err := r.setVersion(version); err != nil {
		return err
	}
	if _, err := wait.Until(rolloutDeadline, 500*time.Millisecond, func() (bool, string) {
		return r.podsOn(version, schedule.BaseReplicas)
	}); err != nil {
		return fmt.Errorf("rollout to %s: %w", version, err)
	}
	return nil
}

func (r *run) setVersion(version string) error {
	ctx, cancel := kube.Ctx()
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`, versionLabel, version)
	_, err := r.cs.AppsV1().Deployments(r.cfg.CounterNS).Patch(ctx, r.cfg.CounterName, types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("setting the version label of deployment %s to %s: %w", r.cfg.CounterName, version, err)
	}
	r.version = version
	return nil
}

// podsOn says whether the Deployment runs exactly `replicas` serving pods, all of version, and
// the operator has registered exactly those.
func (r *run) podsOn(version string, replicas int) (bool, string) {
	ctx, cancel := kube.Ctx()
	d, err := r.cs.AppsV1().Deployments(r.cfg.CounterNS).Get(ctx, r.cfg.CounterName, metav1.GetOptions{})
	cancel()
	if err != nil {
		return false, err.Error()
	}
	pods := r.pods.All()
	if ok, msg := kube.DeploymentSettled(d, pods, int32(replicas)); !ok {
		return false, msg
	}
	for _, p := range pods {
		if p.Labels[versionLabel] != version {
			return false, fmt.Sprintf("pod %s is on version %s, want %s", p.Name, p.Labels[versionLabel], version)
		}
	}
	m := r.maps.History().Latest()
	if m == nil {
		return false, "no ShardMap seen yet"
	}
	if got, want := m.Registered(), names(pods); fmt.Sprint(got) != fmt.Sprint(want) {
		return false, fmt.Sprintf("registered %v, running %v", got, want)
	}
	return true, ""
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
