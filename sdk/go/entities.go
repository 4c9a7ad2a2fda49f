package kshard

import (
	"sort"
	"sync"
	"time"
)

type entityKey struct {
	typ, id   string
	singleton bool // the singleton named id (typ is SingletonType)
}

// entity is what the Server remembers of one entity: whether the app holds it, and the bound
// below which its messages are late. Its fields are guarded by table.mu; calls holds one call at
// a time for it.
type entity struct {
	calls     sync.Mutex
	refs      int       // calls waiting for or holding `calls`
	active    bool      // a message or a start reached the handler since the last stop
	started   bool      // a start succeeded since the last stop (what runs a singleton)
	bound     uint64    // the last turn handled or stopped; a message must be above it
	stoppedAt time.Time // when the last stop was recorded (while !active)
}

type stopRecord struct {
	at  time.Time
	key entityKey
}

// table holds the Server's entities. gate is held shared by every message and stop for its
// whole call and exclusively by a reset, which so waits for the calls in flight.
type table struct {
	gate     sync.RWMutex
	mu       sync.Mutex
	entities map[entityKey]*entity
	resetBy  string       // the incarnation of the last reset's sidecar process
	stops    []stopRecord // bounds of stopped entities, oldest first
	keep     time.Duration
	now      func() time.Time
}

func newTable(keep time.Duration) *table {
	return &table{entities: map[entityKey]*entity{}, keep: keep, now: time.Now}
}

// staleSender says whether a callback of sidecar process `from` is refused: a reset came from
// another one. Callbacks before any reset, or without the header, are accepted.
func (t *table) staleSender(from string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.resetBy == "" || from == "" || from == t.resetBy {
		return "", false
	}
	return t.resetBy, true
}

// acquire takes a reference on the entity of k, creating its record.
func (t *table) acquire(k entityKey) *entity {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entities[k]
	if e == nil {
		e = &entity{}
		t.entities[k] = e
	}
	e.refs++
	return e
}

// release drops the reference; a record with nothing to remember goes.
func (t *table) release(k entityKey, e *entity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e.refs--
	if e.refs == 0 && !e.active && e.bound == 0 {
		delete(t.entities, k)
	}
}

// admit checks a message's turn against the entity's bound; when it is not late, it raises the
// bound to it and marks the entity active. Returns the bound and whether the message is late.
func (t *table) admit(e *entity, turn uint64) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if turn != 0 && turn <= e.bound {
		return e.bound, true
	}
	if turn > e.bound {
		e.bound = turn
	}
	e.active = true
	return e.bound, false
}

// admitStart checks a start's turn as admit does, and raises the bound, but marks nothing
// active: startDone does once the start is known. need says whether a handler must run it: an
// entity not active yet, a singleton not started yet (a message may have reached it first).
func (t *table) admitStart(k entityKey, e *entity, turn uint64) (bound uint64, late, need bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if turn != 0 && turn <= e.bound {
		return e.bound, true, false
	}
	if turn > e.bound {
		e.bound = turn
	}
	if k.singleton {
		return e.bound, false, !e.started
	}
	return e.bound, false, !e.active
}

// startDone records a start's outcome: a started entity is active; one whose start failed
// stays as it was, its bound kept (and forgotten in time) as a stop's when it is not active.
func (t *table) startDone(k entityKey, e *entity, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok {
		e.active, e.started = true, true
		return
	}
	if !e.active {
		t.stoppedLocked(k, e, 0)
	}
}

func (t *table) isActive(e *entity) (bool, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.active, e.bound
}

// stopped records the stop of k as of `turn`; the bound is the newer of it and the last turn
// handled (a stop the sidecar gave up on may come after a newer message).
func (t *table) stopped(k entityKey, e *entity, turn uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stoppedLocked(k, e, turn)
}

func (t *table) stoppedLocked(k entityKey, e *entity, turn uint64) {
	now := t.now()
	t.pruneLocked(now)
	e.active, e.started = false, false
	if turn > e.bound {
		e.bound = turn
	}
	if e.bound == 0 {
		if e.refs == 0 {
			delete(t.entities, k)
		}
		return
	}
	e.stoppedAt = now
	t.stops = append(t.stops, stopRecord{now, k})
}

// pruneLocked forgets the bounds of entities stopped longer than keep ago: a late message comes
// within the sidecar's budget for it (at most its ownership lease).
func (t *table) pruneLocked(now time.Time) {
	n := 0
	for n < len(t.stops) && now.Sub(t.stops[n].at) > t.keep {
		r := t.stops[n]
		if e := t.entities[r.key]; e != nil && !e.active && e.refs == 0 && e.stoppedAt.Equal(r.at) {
			delete(t.entities, r.key)
		}
		n++
	}
	t.stops = t.stops[n:]
}

// beginReset starts a reset by sidecar process `from` (under the exclusive gate): turns start
// over with a new process, so its bounds go. Returns the active entities, sorted.
func (t *table) beginReset(from string) []entityKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from != t.resetBy {
		t.stops = nil
		for k, e := range t.entities {
			e.bound = 0
			if !e.active && e.refs == 0 {
				delete(t.entities, k)
			}
		}
	}
	t.resetBy = from
	var keys []entityKey
	for k, e := range t.entities {
		if e.active {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].singleton != keys[j].singleton {
			return !keys[i].singleton
		}
		if keys[i].typ != keys[j].typ {
			return keys[i].typ < keys[j].typ
		}
		return keys[i].id < keys[j].id
	})
	return keys
}

// entityOf is the record of k, or nil (under the exclusive gate).
func (t *table) entityOf(k entityKey) *entity {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entities[k]
}

func (t *table) activeCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.entities {
		if e.active {
			n++
		}
	}
	return n
}
