package load

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"kshard.local/e2e/support/filter"
)

// Request is one logical increment (or read) and its outcome, as the driver saw it.
type Request struct {
	Driver string
	Entity string
	Shard  int
	Start  time.Time
	End    time.Time
	OK     bool
	// Reason of a failure ("http 504 SendTimeout", "connection reset", ...).
	Reason string
	// Entry is the pod the request was sent to; ServedBy the pod whose counter answered.
	Entry    string
	ServedBy string
	// Rerouted counts attempts that never reached a pod (the connection was refused) and were
	// sent to another pod instead.
	Rerouted int
}

// Recorder keeps every request of every driver of a run.
type Recorder struct {
	mu   sync.Mutex
	reqs []Request
}

func (r *Recorder) add(q Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
}

// Between returns the requests that started in [from, to).
func (r *Recorder) Between(from, to time.Time) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return filter.Keep(r.reqs, func(q Request) bool { return !q.Start.Before(from) && q.Start.Before(to) })
}

// Overlapping returns the requests that were in flight at some moment of [from, to]: started
// before `to` and ended at or after `from`. A request cut off by a fault that started just before
// it is counted, unlike with Between.
func (r *Recorder) Overlapping(from, to time.Time) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return filter.Keep(r.reqs, func(q Request) bool { return q.Start.Before(to) && !q.End.Before(from) })
}

// Of returns the requests of one driver.
func Of(reqs []Request, driver string) []Request {
	return filter.Keep(reqs, func(q Request) bool { return q.Driver == driver })
}

// Stats summarises requests.
type Stats struct {
	Sent     int `json:"sent"`
	Acked    int `json:"acknowledged"`
	Failed   int `json:"failed"`
	Rerouted int `json:"reroutedAttempts"`
	// Reasons of failures and of reroutes, with counts.
	FailReasons    map[string]int `json:"failReasons,omitempty"`
	RerouteReasons map[string]int `json:"-"`
	Seconds        float64        `json:"seconds"`
	RatePerSecond  float64        `json:"ratePerSecond"`
	// Latency of acknowledged requests, in milliseconds.
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
	// FirstFailures lists up to ten failures with entity, time and reason, for the report.
	FirstFailures []string `json:"firstFailures,omitempty"`
}

// Summarize computes Stats over requests that span the given period.
func Summarize(reqs []Request, period time.Duration) Stats {
	s := Stats{FailReasons: map[string]int{}, Seconds: period.Seconds()}
	var lat []float64
	for _, q := range reqs {
		s.Sent++
		s.Rerouted += q.Rerouted
		if q.OK {
			s.Acked++
			lat = append(lat, float64(q.End.Sub(q.Start).Microseconds())/1000)
			continue
		}
		s.Failed++
		s.FailReasons[q.Reason]++
		if len(s.FirstFailures) < 10 {
			s.FirstFailures = append(s.FirstFailures, q.Start.Format("15:04:05.000")+" "+q.Entity+
				" (shard "+strconv.Itoa(q.Shard)+") via "+q.Entry+": "+q.Reason)
		}
	}
	if period > 0 {
		s.RatePerSecond = float64(s.Sent) / period.Seconds()
	}
	sort.Float64s(lat)
	s.P50, s.P90, s.P99 = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
