package scenariotest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kshard.local/e2e/scenarios/kube"
	"kshard.local/e2e/scenarios/load"
	"kshard.local/e2e/support/wait"
)

// scenarioCrash (5): every process of a pod is SIGKILLed without warning and stays dead; the pod
// object is then deleted, and the kubelet, finding nothing running, reports every container
// terminated and removes the object. Its shards must move only once the pod is
// gone, and then at once: the kubelet confirmed that nothing of it runs. (A pod removed while
// its processes may still run, a force delete or a lost node's pods, is the randomized fault
// suite's: there the shards wait for the pod's ownership lease.) The scenario reports the time
// from the kill to full service and the requests that failed in between; kshard may
// legitimately fail requests that were inside the crashed pod, so these are measured, not
// asserted.
func scenarioCrash(c sc, s *suite) {
	ns := s.cfg.counterNS
	s.waitSteady(c, 3)
	before := s.latest()
	victim := before.Registered()[0]
	victimShards := shardsOf(before, victim)
	pod, killer := s.killerOf(c, victim)
	c.r.figure("crashed pod", fmt.Sprintf("%s with %d shards", victim, len(victimShards)))

	// Requests stop entering through the victim (a load balancer would notice later; requests
	// that entered through it before the kill are reported apart).
	s.pods.Exclude(victim)
	t0 := time.Now()
	n, err := killer.kill()
	if err != nil || n == 0 {
		c.fatalf("killing the processes of pod %s: %d containers, %v", victim, n, err)
	}
	// The processes are dead once every container's cgroup.kill was written, not when the first
	// was: the containers die one after the other, and the app may still log an activation for a
	// message its sidecar handed it before the sidecar died. Intervals of the victim close at
	// this moment, which no other pod's activation can precede (its shards move later).
	s.recordDeath(victim, time.Now())
	var restartsMu sync.Mutex
	restarts := 0
	stopKilling := make(chan struct{})
	killing := killer.keepDead(stopKilling, func(at time.Time, _ int) {
		s.recordDeath(victim, at)
		restartsMu.Lock()
		restarts++
		restartsMu.Unlock()
	})
	c.logf("SIGKILLed the %d containers of pod %s", n, victim)

	// The pod is deleted (its uid as precondition); the kubelet confirms its end in the pod's
	// status, and the object goes. unconfirmed: the last time the object was seen without that
	// confirmation (at first, the deletion's start: until then it was not even deleting). A
	// confirmation stays once given (a deleting pod's containers are not restarted).
	uid := pod.UID
	unconfirmed := time.Now()
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	err = s.cs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}})
	cancel()
	// A deleting pod's containers are not restarted: stop killing, so that the kills do not race
	// the kubelet's own stop of the containers (containerd then loses the shim: "ttrpc: closed").
	close(stopKilling)
	<-killing
	if err != nil {
		c.fatalf("deleting pod %s: %v", victim, err)
	}
	// Usually seconds. But containerd 1.6 can lose the kubelet's stop of a container whose
	// process it has not yet seen die (the shim exits under the call: "ttrpc: closed"); the
	// kubelet then kills it again only once the grace period has run out. Meanwhile the pod is
	// unconfirmed, and its shards rightly stay where they are.
	goneWithin := time.Minute
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		goneWithin += time.Duration(*g) * time.Second
	}
	c.waitUntil(goneWithin, "pod "+victim+"'s object is gone", func() (bool, string) {
		asked := time.Now()
		ctx, cancel := apiCtx()
		defer cancel()
		p, err := s.cs.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return true, ""
		}
		if err == nil && !kube.TerminationConfirmed(p) {
			unconfirmed = asked
		}
		return false, fmt.Sprintf("still there (%v)", err)
	})
	gone := time.Now()

	c.waitUntil(2*time.Minute, "the crashed pod's shards are reassigned", func() (bool, string) {
		m := s.latest()
		left := len(shardsOf(m, victim))
		return left == 0 && m.Unassigned() == 0, fmt.Sprintf("%d shards still on %s; %s", left, victim, m.Describe())
	})
	var reassigned time.Duration
	for _, snap := range s.history().Between(t0, time.Now()) {
		if len(shardsOf(snap.Map, victim)) == 0 && snap.Map.Unassigned() == 0 {
			reassigned = snap.At.Sub(t0)
			break
		}
	}

	// Safety: no shard of the victim went to another pod before the kubelet confirmed its end.
	for _, snap := range s.history().Between(t0, unconfirmed) {
		for _, sh := range victimShards {
			if o := snap.Map.Owners[sh-1]; o != "" && o != victim {
				c.errorf("shard %d was given to %s at %s (epoch %d), before the kubelet confirmed the end of pod %s",
					sh, o, snap.At.Format("15:04:05.000"), snap.Map.Status.Epoch, victim)
			}
		}
	}

	// Full service: a read of one counter of each of the victim's shards succeeds, all in one pass.
	probes, missing := load.OneEntityPerShard(s.continuous, victimShards)
	if len(missing) > 0 {
		c.fatalf("no continuous entity for shards %v", missing)
	}
	passes := 0
	fullErr := func() error {
		_, err := wait.Until(2*time.Minute, 50*time.Millisecond, func() (bool, string) {
			passes++
			failures := probePass(s.client, s.pods, probes)
			return len(failures) == 0, fmt.Sprintf("%d of %d reads failed, e.g. %v", len(failures), len(probes), head(failures, 3))
		})
		return err
	}()
	full := time.Since(t0)
	if fullErr != nil {
		c.errorf("no full service after the crash: %v", fullErr)
	}
	c.r.figure("kill → pod object deleted", ms(gone.Sub(t0)))
	c.r.figure("kill → shards reassigned (seen in the ShardMap)", ms(reassigned))
	c.r.figure("kill → full service (every shard of the crashed pod answers)", ms(full))
	restartsMu.Lock()
	c.r.figure("restarts of the crashed containers killed again", restarts)
	restartsMu.Unlock()
	c.r.figure("probe passes until full service", passes)

	// The requests in flight from the kill to full service.
	reqs := load.Of(s.rec.Overlapping(t0, t0.Add(full)), continuousDriver)
	st := s.window(c, t0, t0.Add(full))
	c.r.figure("failed requests (kill → full service)", fmt.Sprintf("%d of %d", st.Failed, st.Sent))
	c.r.figure("failed requests by cause", failuresByCause(reqs, victim, victimShards))
	mv := s.history().Moves(t0, time.Now())
	c.r.figure("shard moves (kill → full service)", mv.Total)

	// Back to 3 balanced pods: the Deployment replaced the pod.
	took := s.waitBalancedOver(c, 3, 6*time.Minute)
	c.r.figure("replacement pod registered and balanced after", secs(took))
}

// probePass reads each entity once, 16 at a time, and returns the failures.
func probePass(client *load.Client, pods load.Pods, entities []*load.Entity) []string {
	var mu sync.Mutex
	var failures []string
	work := make(chan *load.Entity)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				ready := pods.Ready()
				var err error
				if len(ready) == 0 {
					err = fmt.Errorf("no ready pod")
				} else {
					_, err = client.Do(bg(), ready[len(e.ID)%len(ready)], e.ID, false)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s (shard %d): %v", e.ID, e.Shard, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, e := range entities {
		work <- e
	}
	close(work)
	wg.Wait()
	sort.Strings(failures)
	return failures
}

// failuresByCause splits failed requests: entered through the crashed pod, or through another
// pod for a shard of the crashed pod, or other.
func failuresByCause(reqs []load.Request, victim string, shards []int) string {
	own := map[int]bool{}
	for _, s := range shards {
		own[s] = true
	}
	via, toShard, other := 0, 0, 0
	for _, q := range reqs {
		switch {
		case q.OK:
		case q.Entry == victim:
			via++
		case own[q.Shard]:
			toShard++
		default:
			other++
		}
	}
	return fmt.Sprintf("%d entered through the crashed pod, %d for its shards through other pods, %d other", via, toShard, other)
}
