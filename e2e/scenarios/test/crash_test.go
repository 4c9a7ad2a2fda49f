package scenariotest

import (
	"fmt"
	"sort"
	"sync"
	"time"

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
	s.waitSteady(c, 3)
	before := s.latest()
	victim := before.Registered()[0]
	victimShards := shardsOf(before, victim)
	c.r.figure("crashed pod", fmt.Sprintf("%s with %d shards", victim, len(victimShards)))
	// Shards of the victim must not move while `unconfirmed` (checked below).
	killed := s.killAndDelete(c, victim)
	t0, unconfirmed, gone := killed.at, killed.unconfirmed, killed.gone

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
	c.r.figure("restarts of the crashed containers killed again", killed.restarts)
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
