package runner

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"kshard.local/e2e/nemesis/history"
	"kshard.local/e2e/scenarios/load"
)

// readShare is the share of the load's requests that read a counter instead of incrementing it.
const readShare = 0.15

// maxInFlight bounds the load's requests in flight: while a fault holds requests (a frozen app
// answers nothing for as long as it is frozen), the rate drops instead of piling up requests.
const maxInFlight = 128

// loadGen sends requests to random counters through random serving pods at a fixed rate, each
// request in its own goroutine (so that concurrent operations on one counter happen, which the
// order check needs), and records every one of them in the history.
type loadGen struct {
	e        *env
	counters []*load.Entity
	limiter  *rate.Limiter
	slots    chan struct{}
	cancel   context.CancelFunc
	inFlight sync.WaitGroup
	done     chan struct{}
}

func startLoad(e *env, counters []*load.Entity, perSecond float64) *loadGen {
	ctx, cancel := context.WithCancel(context.Background())
	g := &loadGen{e: e, counters: counters, limiter: rate.NewLimiter(rate.Limit(perSecond), 1),
		slots: make(chan struct{}, maxInFlight), cancel: cancel, done: make(chan struct{})}
	go g.dispatch(ctx)
	return g
}

func (g *loadGen) dispatch(ctx context.Context) {
	defer close(g.done)
	for {
		if g.limiter.Wait(ctx) != nil {
			return
		}
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c := g.counters[rand.IntN(len(g.counters))]
		kind := history.Increment
		if rand.Float64() < readShare {
			kind = history.Read
		}
		g.inFlight.Add(1)
		go func() {
			defer func() { <-g.slots; g.inFlight.Done() }()
			g.e.send(c.ID, kind, "load", g.e.load)
		}()
	}
}

// stop sends no new request and waits for those in flight: they are not abandoned, since an
// abandoned request could still be applied later, after the final read.
func (g *loadGen) stop() {
	g.cancel()
	<-g.done
	g.inFlight.Wait()
}

// send makes one request to a counter through a random serving pod (another one when the pod
// refused the connection) and records it; it returns the operation.
func (e *env) send(counter string, kind history.Kind, source string, client *load.Client) history.Op {
	q, r, err := client.Send(e.pods, counter, kind == history.Increment)
	op := history.FromRequest(q, kind, r.Value, err, source)
	e.rec.Add(op)
	return op
}

// readEach reads every counter once, `parallel` at a time, retrying a counter (reads change
// nothing) every 250 ms until it answers or until deadline. It returns when each was read, with
// the values, and the counters still unread at the deadline.
func (e *env) readEach(counters []*load.Entity, parallel int, deadline time.Time, source string) (map[string]int64, []string) {
	var mu sync.Mutex
	values := map[string]int64{}
	var unread []string
	load.EachParallel(counters, parallel, func(c *load.Entity) {
		var value int64
		ok := load.Retry(deadline, 250*time.Millisecond, func() bool {
			op := e.send(c.ID, history.Read, source, e.probe)
			value = op.Value
			return op.Outcome == history.OK
		})
		mu.Lock()
		defer mu.Unlock()
		if ok {
			values[c.ID] = value
		} else {
			unread = append(unread, c.ID)
		}
	})
	return values, unread
}
