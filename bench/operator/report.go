package main

import (
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"
)

// fanOut is one consumer kind's figures in one phase, per pod slot (a pod and its replacement).
type fanOut struct {
	kind                     string
	slots                    int     // slots with such a consumer (full: the sample)
	perConsumer, perWrite    float64 // bytes read, per slot, and per slot and status write
	maxWrite, p50, p99       int64   // bytes one consumer read for one write (delta: one fetch)
	perWriteAPI, perWriteOp  float64 // perWrite's part from the API server (with fallbacks), from the operator
	total, apiTotal          float64 // every pod's, bytes: all sources, through the API server
	api, operator, fallback  int64   // bytes read, all consumers, by source
	fetches, fallbacks, unkn int64
	extrapolated             bool
}

func (r result) fanOuts(ph int) []fanOut {
	f := r.Fleet
	if f == nil {
		return nil
	}
	var out []fanOut
	for _, k := range []*kindStats{&f.fullStats, &f.deltaStats} {
		slots := r.Pods
		if k == &f.fullStats {
			if !f.full {
				continue
			}
			slots = f.fullSlots()
		} else if !f.delta {
			continue
		}
		if slots == 0 {
			continue
		}
		x := fanOut{kind: k.name, slots: slots, maxWrite: k.maxWrite[ph].Load(), extrapolated: slots < r.Pods,
			api: k.bytes[ph][srcAPI].Load(), operator: k.bytes[ph][srcOperator].Load(), fallback: k.bytes[ph][srcFallback].Load(),
			fetches: k.fetches[ph].Load(), fallbacks: k.fallbacks[ph].Load(), unkn: k.unknown[ph].Load()}
		x.perConsumer = float64(k.total(ph)) / float64(slots)
		// Each consumer receives one watch event per write: bytes per event received is bytes
		// per consumer per write, whatever the number of consumers at the time (surge pods).
		if ev := k.events[ph].Load(); ev > 0 {
			x.perWrite = float64(k.total(ph)) / float64(ev)
			x.perWriteAPI = float64(x.api+x.fallback) / float64(ev)
			x.perWriteOp = float64(x.operator) / float64(ev)
		}
		x.p50, x.p99 = k.writes[ph].percentile(50), k.writes[ph].percentile(99)
		x.total = x.perConsumer * float64(r.Pods)
		x.apiTotal = float64(x.api+x.fallback) / float64(slots) * float64(r.Pods)
		out = append(out, x)
	}
	return out
}

// ratio is total(full) / total(delta) in phase ph, 0 when either is missing.
func (r result) ratio(ph int) float64 {
	var full, delta float64
	for _, x := range r.fanOuts(ph) {
		if x.kind == "full" {
			full = x.total
		} else {
			delta = x.total
		}
	}
	if full == 0 || delta == 0 {
		return 0
	}
	return full / delta
}

func kib(n float64) string { return strconv.FormatFloat(n/1024, 'f', 1, 64) + " KiB" }

func cpuText(s float64) string {
	if s < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(s, 'f', 1, 64) + " s"
}

func report(o options, r result) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64) }
	reg, ro := r.Phases[phaseRegistration], r.Phases[phaseRollout]
	rollout, rolloutWrites := "–", "–"
	if r.RolledOut {
		rollout, rolloutWrites = ms(ro.Duration)+" ms", strconv.FormatInt(ro.Writes, 10)
	}
	fmt.Printf("| pods | shards | registration | status: all assigned | status: balanced | pods hold every shard | status bytes | operator peak RSS | status writes | assigns | unassigns | rollout | rollout writes | operator CPU reg / rollout | API server CPU reg / rollout | operator peak RSS, whole run |\n")
	fmt.Printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Printf("| %d | %d | %s ms | +%s ms | +%s ms | +%s ms | %d | %.1f MiB | %d (%d registering) | %d | %d | %s | %s | %s / %s | %s / %s | %.1f MiB |\n",
		r.Pods, r.Shards, ms(r.Registration), ms(r.AllAssigned), ms(r.Balanced), ms(r.AllHeld),
		r.Stored.WholeStatusBytes, float64(r.PeakRSSKiB)/1024, r.Writes, r.RegistrationWrites, r.Assigns, r.Unassigns,
		rollout, rolloutWrites, cpuText(reg.OperatorCPU), cpuText(ro.OperatorCPU), cpuText(reg.APIServerCPU), cpuText(ro.APIServerCPU),
		float64(r.RunPeakRSSKiB)/1024)
	if z := r.Stored; z.Segments > 0 {
		fmt.Printf("\nstored: ShardMap object %d bytes (status %d) naming %d ShardMapSegments, the largest %d bytes; the whole status %d bytes\n",
			z.ObjectBytes, z.StatusBytes, z.Segments, z.LargestSegment, z.WholeStatusBytes)
	}
	fmt.Printf("(+: after the last registration was answered; registration phase: first register → every shard held and the consumers up to date, %s ms; flags: %q)\n",
		ms(reg.Duration), o.operatorFlags)
	if r.Fleet != nil {
		fmt.Printf("\n| phase | consumer | pods with one | status writes | bytes per consumer | per consumer per write (API / operator) | one write: p50 / p99 / max | total map traffic, every pod | through the API server, every pod | operator requests | fallbacks (wantKnown false) |\n")
		fmt.Printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for ph := 0; ph < nPhases; ph++ {
			if ph == phaseRollout && !r.RolledOut {
				continue
			}
			for _, x := range r.fanOuts(ph) {
				label := ""
				if x.extrapolated {
					label = fmt.Sprintf(" (×%d/%d, extrapolated)", r.Pods, x.slots)
				}
				fmt.Printf("| %s | %s | %d | %d | %s | %s (%s / %s) | %s / %s / %s | %s%s | %s%s | %d | %d (%d) |\n",
					phaseNames[ph], x.kind, x.slots, r.Phases[ph].Writes, kib(x.perConsumer), kib(x.perWrite), kib(x.perWriteAPI), kib(x.perWriteOp),
					kib(float64(x.p50)), kib(float64(x.p99)), kib(float64(x.maxWrite)),
					mib(int64(x.total)), label, mib(int64(x.apiTotal)), label, x.fetches, x.fallbacks, x.unkn)
			}
		}
		if r.RolledOut && r.ratio(phaseRollout) > 0 {
			fmt.Printf("\nrollout: total map traffic full / delta = %.1f×\n", r.ratio(phaseRollout))
		}
		fmt.Printf("(bytes: everything read from the consumers' connections, TLS and HTTP included; per consumer: per pod slot, a pod and its replacement (and both while they overlap); per write: bytes over watch events received, initial lists and reads included; one write: a full consumer's watch event (JSON), a delta consumer's fetch with the events it answers, a consumer's first list or read excluded)\n")
		for ph := 0; ph < nPhases; ph++ {
			if b := r.Phases[ph].Behind; b > 0 {
				fmt.Printf("(%s: %d consumers were not up to date when the figures were taken)\n", phaseNames[ph], b)
			}
		}
	}
	if o.csvPath != "" {
		writeCSV(o, r)
	}
}

const csvHeader = "date,pods,shards,objects_ready_ms,registration_ms,all_assigned_ms,balanced_ms,all_held_ms,status_bytes,object_bytes,segments,largest_segment_bytes,peak_rss_kib,final_rss_kib,epoch,assigns,unassigns,pings,register_retries,status_writes,registration_writes," +
	"consumers,full_sample,run_peak_rss_kib,reg_phase_ms,reg_phase_writes,reg_operator_cpu_s,reg_apiserver_cpu_s,rollout_ms,rollout_writes,rollout_operator_cpu_s,rollout_apiserver_cpu_s," +
	"reg_full_bytes_per_consumer,reg_full_bytes_per_write,reg_full_max_write,reg_full_p50_write,reg_full_p99_write,reg_full_total,reg_delta_bytes_per_consumer,reg_delta_bytes_per_write,reg_delta_max_write,reg_delta_p50_write,reg_delta_p99_write,reg_delta_total,reg_delta_api_total,reg_delta_fallbacks," +
	"rollout_full_bytes_per_consumer,rollout_full_bytes_per_write,rollout_full_max_write,rollout_full_p50_write,rollout_full_p99_write,rollout_full_total,rollout_delta_bytes_per_consumer,rollout_delta_bytes_per_write,rollout_delta_max_write,rollout_delta_p50_write,rollout_delta_p99_write,rollout_delta_total,rollout_delta_api_total,rollout_delta_fallbacks,rollout_full_delta_ratio"

func writeCSV(o options, r result) {
	ms := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64) }
	if data, err := os.ReadFile(o.csvPath); err == nil {
		if first, _, _ := strings.Cut(string(data), "\n"); first != csvHeader {
			old := o.csvPath + "." + time.Now().UTC().Format("20060102T150405") + ".old"
			if err := os.Rename(o.csvPath, old); err == nil {
				log.Printf("%s had other columns; moved to %s", o.csvPath, old)
			}
		}
	}
	_, statErr := os.Stat(o.csvPath)
	f, err := os.OpenFile(o.csvPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatalf("csv %s: %v", o.csvPath, err)
	}
	defer f.Close()
	if os.IsNotExist(statErr) {
		fmt.Fprintln(f, csvHeader)
	}
	reg, ro := r.Phases[phaseRegistration], r.Phases[phaseRollout]
	row := []string{time.Now().UTC().Format(time.RFC3339)}
	for _, v := range []int64{int64(r.Pods), int64(r.Shards)} {
		row = append(row, strconv.FormatInt(v, 10))
	}
	row = append(row, ms(r.ObjectsReady), ms(r.Registration), ms(r.AllAssigned), ms(r.Balanced), ms(r.AllHeld))
	for _, v := range []int64{int64(r.Stored.WholeStatusBytes), int64(r.Stored.ObjectBytes), int64(r.Stored.Segments), int64(r.Stored.LargestSegment), r.PeakRSSKiB, r.FinalRSSKiB, r.Epoch, r.Assigns, r.Unassigns, r.Pings, r.RegisterRetries, r.Writes, r.RegistrationWrites} {
		row = append(row, strconv.FormatInt(v, 10))
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row = append(row, o.consumers, strconv.Itoa(o.fullSample), strconv.FormatInt(r.RunPeakRSSKiB, 10),
		ms(reg.Duration), strconv.FormatInt(reg.Writes, 10), num(reg.OperatorCPU), num(reg.APIServerCPU))
	if r.RolledOut {
		row = append(row, ms(ro.Duration), strconv.FormatInt(ro.Writes, 10), num(ro.OperatorCPU), num(ro.APIServerCPU))
	} else {
		row = append(row, "", "", "", "")
	}
	for ph := 0; ph < nPhases; ph++ {
		var full, delta *fanOut
		for _, x := range r.fanOuts(ph) {
			if x.kind == "full" {
				full = &x
			} else {
				delta = &x
			}
		}
		if full != nil {
			row = append(row, num(full.perConsumer), num(full.perWrite), strconv.FormatInt(full.maxWrite, 10),
				strconv.FormatInt(full.p50, 10), strconv.FormatInt(full.p99, 10), num(full.total))
		} else {
			row = append(row, "", "", "", "", "", "")
		}
		if delta != nil {
			row = append(row, num(delta.perConsumer), num(delta.perWrite), strconv.FormatInt(delta.maxWrite, 10),
				strconv.FormatInt(delta.p50, 10), strconv.FormatInt(delta.p99, 10), num(delta.total),
				num(delta.apiTotal), strconv.FormatInt(delta.fallbacks, 10))
		} else {
			row = append(row, "", "", "", "", "", "", "", "")
		}
	}
	row = append(row, num(r.ratio(phaseRollout)))
	fmt.Fprintln(f, strings.Join(row, ","))
}
