package eventlog

import (
	"sort"
	"time"
)

// Peak is the most entities active at once on one pod, and when that was first reached.
type Peak struct {
	Active int
	At     time.Time
}

// MostActive returns, for each pod, the most entities active on it at once during [from, to]
// (from == to: at that instant). Intervals are those Check builds: an entity is active on a pod
// from its activation to its stop, or to a death of the pod in deaths, or to the end of the log;
// one that began before from counts from from. At one instant stops count before activations:
// the sidecar admits an entity beyond its limit only once another's stop has returned.
func MostActive(events []Event, deaths map[string][]time.Time, from, to time.Time) map[string]Peak {
	sorted := append([]Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].TsUs < sorted[j].TsUs })
	byEntity := map[string][]Event{}
	for _, e := range sorted {
		byEntity[e.Entity] = append(byEntity[e.Entity], e)
	}
	type edge struct {
		at    time.Time
		delta int
	}
	edges := map[string][]edge{}
	var ignored Result // the anomalies are Check's to report
	for id, evs := range byEntity {
		for _, iv := range buildIntervals(id, evs, deaths, &ignored) {
			if !iv.End.After(from) || iv.Start.After(to) {
				continue
			}
			start := iv.Start
			if start.Before(from) {
				start = from
			}
			edges[iv.Pod] = append(edges[iv.Pod], edge{start, 1}, edge{iv.End, -1})
		}
	}
	out := map[string]Peak{}
	for pod, es := range edges {
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].delta < es[j].delta
		})
		active := 0
		var peak Peak
		for _, e := range es {
			active += e.delta
			if active > peak.Active {
				peak = Peak{active, e.at}
			}
		}
		out[pod] = peak
	}
	return out
}
