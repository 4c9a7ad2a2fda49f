// Command nemesis runs kshard's randomized fault suite on the local cluster, on an installation
// of the chart and the counter example (e2e/nemesis/run.sh sets it up and runs this):
//
//	nemesis -seed 42 -duration 5m
//
// It prints the seed and the schedule first; the same seed replays the same schedule. The report
// goes to -report (nemesis.md, nemesis.json, history.jsonl). Exit status: 0 when every check
// passed, 1 when a check found a violation or the run had a problem, 2 when it could not run.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"kshard.local/e2e/nemesis/runner"
)

func main() {
	wd, _ := os.Getwd() // e2e/nemesis
	root := envOr("KSHARD_REPO_ROOT", filepath.Join(wd, "..", ".."))
	cfg := runner.Config{
		Kubeconfig:  os.Getenv("KUBECONFIG"),
		RepoRoot:    root,
		ClusterDir:  envOr("KSHARD_CLUSTER_DIR", filepath.Join(root, ".cluster")),
		CounterNS:   envOr("COUNTER_NAMESPACE", "demo"),
		CounterName: envOr("COUNTER_NAME", "counter"),
		KshardNS:    envOr("KSHARD_NAMESPACE", "kshard-system"),
		EventLog:    envOr("KSHARD_COUNTER_EVENT_LOG", "/tmp/kshard-counter/events.log"),
		Commit:      os.Getenv("KSHARD_COMMIT"),
	}
	seed := flag.String("seed", os.Getenv("SEED"), "the schedule's seed (default: a random one, printed)")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Minute, "no step of the schedule starts after this")
	flag.Float64Var(&cfg.Rate, "rate", 40, "the load's requests per second")
	flag.IntVar(&cfg.PerShard, "per-shard", 2, "counters per shard")
	flag.DurationVar(&cfg.Quiet, "quiet", 30*time.Second, "load on the settled system before the final reads")
	flag.StringVar(&cfg.ReportDir, "report", filepath.Join(wd, "report"), "where the report goes")
	replay := flag.String("replay", "", "the command that replays this run, for the report (default: this command with its seed)")
	flag.Parse()

	cfg.Seed = rand.Uint64() % 1000000
	if *seed != "" {
		n, err := strconv.ParseUint(*seed, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nemesis: -seed %q: want a number\n", *seed)
			os.Exit(2)
		}
		cfg.Seed = n
	}
	cfg.Replay = *replay
	if cfg.Replay == "" {
		cfg.Replay = fmt.Sprintf("bash e2e/nemesis/run.sh --seed %d --duration %s", cfg.Seed, cfg.Duration)
	}
	if cfg.Kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "nemesis: KUBECONFIG is not set: run it through e2e/nemesis/run.sh")
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "nemesis: seed %d, duration %s\n", cfg.Seed, cfg.Duration)
	rep, err := runner.Run(cfg)
	if werr := rep.Write(cfg.ReportDir); werr != nil {
		fmt.Fprintf(os.Stderr, "nemesis: writing the report to %s: %v\n", cfg.ReportDir, werr)
	}
	fmt.Fprintf(os.Stderr, "nemesis: report in %s/nemesis.md; seed %d; replay: %s\n", cfg.ReportDir, cfg.Seed, cfg.Replay)
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "nemesis: the run broke off: %v\n", err)
		os.Exit(2)
	case !rep.Passed:
		fmt.Fprintln(os.Stderr, "nemesis: FAILED (see the report's checks and problems)")
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "nemesis: PASSED")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
