package main

// The rollout phase: a rolling update of every pod, as a Deployment with maxSurge 25 % and
// maxUnavailable 0 does it. Pod slot s (0..pods-1) is first pod s (version v1), then pod pods+s
// (version v2, its own name and loopback address). Per batch of 25 % of the slots:
//
//  1. the new pods are created, their status written Running and Ready, their consumers started
//     (with nothing held);
//  2. they register, as their sidecars would;
//  3. as many old pods unregister (POST .../unregister with their token, as a sidecar does on
//     SIGTERM; the operator answers once it has unassigned the pod's shards, which the stubs
//     acknowledge; 409 UnregisterDeferred and 503 are retried as a sidecar does);
//  4. the old pods' consumers stop and the old Pod objects are deleted.
//
// It ends when every old pod is gone and the new pods hold every shard (the stubs' single-owner
// check runs throughout), and the consumers have caught up.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const rolloutVersion = "v2"

func (b *bench) rollout(ctx context.Context, res *result) error {
	o := b.o
	if b.fleet != nil {
		b.fleet.phase.Store(phaseRollout)
	}
	start, writes := time.Now(), b.mw.writes.Load()
	opCPU, apiCPU := b.cpu()

	batch := (o.pods + 3) / 4 // maxSurge 25 %, rounded up as a Deployment rounds it
	var registerRetries, unregisterRetries int64
	for lo := 0; lo < o.pods; lo += batch {
		slots := seq(lo, min(lo+batch, o.pods))
		fresh := make([]int, len(slots))
		for k, s := range slots {
			fresh[k] = o.pods + s
		}
		if err := createPods(ctx, b.kc, o, fresh, rolloutVersion, b.pods); err != nil {
			return err
		}
		if b.fleet != nil {
			for _, s := range slots {
				b.fleet.start(s, o.pods+s)
			}
		}
		n, err := registerAll(ctx, o, b.op.manager, fresh, rolloutVersion, b.pods)
		registerRetries += n
		if err != nil {
			return fmt.Errorf("rollout: %w (operator log: %s)", err, b.op.logPath)
		}
		if n, err = b.unregisterAll(ctx, slots); err != nil {
			return fmt.Errorf("rollout: %w (operator log: %s)", err, b.op.logPath)
		}
		unregisterRetries += n
		if b.fleet != nil {
			for _, s := range slots {
				b.fleet.stop(s)
			}
		}
		if err := b.deletePods(ctx, slots); err != nil {
			return err
		}
		b.replaced.Add(int64(len(slots)))
		log.Printf("rollout: %d/%d pods replaced after %v", b.replaced.Load(), o.pods, time.Since(start).Round(time.Millisecond))
		if _, bad := b.stubs.holding(); len(bad) > 0 {
			return fmt.Errorf("rollout: the operator broke the single-owner rule: %v", bad)
		}
	}
	if err := b.waitHeld(ctx, o.pods); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	log.Printf("rollout: the new pods hold every shard %v after its start (%d register, %d unregister retries)",
		time.Since(start).Round(time.Millisecond), registerRetries, unregisterRetries)
	res.RolledOut = true
	b.endPhase(ctx, res, phaseRollout, start, writes, opCPU, apiCPU)
	b.logRSS("after the rollout")
	return nil
}

// unregisterAll unregisters the pods numbered idx as their sidecars do on SIGTERM: retried after
// the Retry-After of a 409 UnregisterDeferred, and while the operator answers 503 or 504 (it
// could not unassign the shards yet: the pod keeps them).
func (b *bench) unregisterAll(ctx context.Context, idx []int) (int64, error) {
	return postAll(ctx, b.o, b.op.manager, "unregister", idx, b.pods, func(i int) any {
		return map[string]string{"pod": podName(i), "uid": b.pods.uids[i]}
	}, func(code int, answer []byte) (time.Duration, bool) {
		switch code {
		case 409:
			var d struct {
				RetryAfterMs int64 `json:"retryAfterMs"`
			}
			if json.Unmarshal(answer, &d) == nil && d.RetryAfterMs > 0 {
				return time.Duration(d.RetryAfterMs) * time.Millisecond, true
			}
			return time.Second, true
		case 503, 504:
			return 200 * time.Millisecond, true
		}
		return 0, false
	})
}

// deletePods deletes the Pod objects numbered idx without a grace period.
func (b *bench) deletePods(ctx context.Context, idx []int) error {
	zero := int64(0)
	return parallel(ctx, len(idx), 32, func(n int) error {
		err := b.kc.CoreV1().Pods(b.o.namespace).Delete(ctx, podName(idx[n]), metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil {
			return fmt.Errorf("delete pod %s: %w", podName(idx[n]), err)
		}
		return nil
	}, func(int) {})
}

// progress logs every 5 s how far the run is and what the consumers read so far in the phase.
func (b *bench) progress(done <-chan struct{}) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		ph := phaseRegistration
		if b.fleet != nil {
			ph = int(b.fleet.phase.Load())
		}
		line := fmt.Sprintf("progress %v: %d status writes, the pods hold %d/%d shards (new pods %d), %d/%d pods replaced",
			time.Since(start).Round(time.Second), b.mw.writes.Load(), b.stubs.heldCount(), b.o.shards,
			b.stubs.holdingFrom(b.o.pods), b.replaced.Load(), b.o.pods)
		if f := b.fleet; f != nil {
			line += "; " + phaseNames[ph] + " phase bytes:"
			if f.full {
				line += fmt.Sprintf(" full consumers (%d) %s", f.fullSlots(), mib(f.fullStats.total(ph)))
			}
			if f.delta {
				line += fmt.Sprintf(" delta consumers %s (%d fallbacks)", mib(f.deltaStats.total(ph)), f.deltaStats.fallbacks[ph].Load())
			}
		}
		log.Print(line)
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
