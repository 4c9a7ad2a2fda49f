package shardmap

import (
	"fmt"
	"sync"
	"time"

	"kshard.local/e2e/support/filter"
)

// Snapshot is one version of a ShardMap and when the watch delivered it.
type Snapshot struct {
	At  time.Time
	Map *ShardMap
}

// History keeps every version of one ShardMap in the order a watch delivered them. A watch
// delivers every write (resourceVersion) unless it has to relist, so owner changes between two
// relists can only be coalesced, never invented.
type History struct {
	mu      sync.Mutex
	snaps   []Snapshot
	changed chan struct{}
}

// NewHistory returns an empty history.
func NewHistory() *History { return &History{changed: make(chan struct{})} }

// Add records a version; versions already seen (same resourceVersion) are ignored.
func (h *History) Add(at time.Time, m *ShardMap) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.snaps); n > 0 && h.snaps[n-1].Map.ResourceVersion == m.ResourceVersion {
		return
	}
	h.snaps = append(h.snaps, Snapshot{At: at, Map: m})
	close(h.changed)
	h.changed = make(chan struct{})
}

// Latest is the newest version, nil before the first.
func (h *History) Latest() *ShardMap {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.snaps) == 0 {
		return nil
	}
	return h.snaps[len(h.snaps)-1].Map
}

// Changed is closed at the next Add.
func (h *History) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// WaitFor waits until cond holds for the latest version, or fails after timeout with what cond
// said last ("" when no version arrived).
func (h *History) WaitFor(timeout time.Duration, cond func(*ShardMap) (bool, string)) (*ShardMap, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	last := "no ShardMap seen yet"
	for {
		changed := h.Changed()
		if m := h.Latest(); m != nil {
			ok, msg := cond(m)
			if ok {
				return m, nil
			}
			last = msg
		}
		select {
		case <-changed:
		case <-deadline.C:
			return h.Latest(), fmt.Errorf("not within %s; last: %s", timeout, last)
		}
	}
}

// At is the version current at time t (the last one delivered at or before t), nil if none.
func (h *History) At(t time.Time) *ShardMap {
	h.mu.Lock()
	defer h.mu.Unlock()
	var m *ShardMap
	for _, s := range h.snaps {
		if s.At.After(t) {
			break
		}
		m = s.Map
	}
	return m
}

// Between returns the versions delivered in [from, to], oldest first.
func (h *History) Between(from, to time.Time) []Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return filter.Keep(h.snaps, func(s Snapshot) bool { return !s.At.Before(from) && !s.At.After(to) })
}

// Moves counts, per shard, how many times its owner changed between from and to. A shard that
// goes from pod A to unassigned to pod B moved once (A to B); a shard that goes from A to
// unassigned and back to A did not move.
type Moves struct {
	PerShard    []int `json:"-"`
	Total       int   `json:"total"`
	Max         int   `json:"maxPerShard"`
	ShardsMoved int   `json:"shardsMoved"`
	// Versions is how many versions of the map the watch delivered in the period; EpochStart is
	// the epoch current when it began.
	Versions   int   `json:"versions"`
	EpochStart int64 `json:"epochStart"`
	EpochEnd   int64 `json:"epochEnd"`
}

// Moves over (from, to].
func (h *History) Moves(from, to time.Time) Moves {
	h.mu.Lock()
	snaps := append([]Snapshot(nil), h.snaps...)
	h.mu.Unlock()
	var last []string
	var mv Moves
	for _, s := range snaps {
		if s.At.After(to) {
			break
		}
		if last == nil {
			last = make([]string, len(s.Map.Owners))
			mv.PerShard = make([]int, len(s.Map.Owners))
		}
		if !s.At.After(from) {
			copyKnown(last, s.Map.Owners)
			mv.EpochStart, mv.EpochEnd = s.Map.Status.Epoch, s.Map.Status.Epoch
			continue
		}
		if mv.Versions == 0 && mv.EpochStart == 0 {
			mv.EpochStart = s.Map.Status.Epoch // no version before the period
		}
		mv.Versions++
		mv.EpochEnd = s.Map.Status.Epoch
		for i, o := range s.Map.Owners {
			if i >= len(last) || o == "" {
				continue
			}
			if last[i] != "" && last[i] != o {
				mv.PerShard[i]++
			}
			last[i] = o
		}
	}
	for _, n := range mv.PerShard {
		mv.Total += n
		if n > 0 {
			mv.ShardsMoved++
		}
		if n > mv.Max {
			mv.Max = n
		}
	}
	return mv
}

func copyKnown(dst, src []string) {
	for i, o := range src {
		if i < len(dst) && o != "" {
			dst[i] = o
		}
	}
}
