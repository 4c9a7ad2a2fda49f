// kshard-node-recorder keeps the real node's records for the tests and for a look after a run:
//   - the container lifecycle log: it follows containerd's event stream (`ctr events`) and
//     appends a line to <log-dir>/containers.jsonl when a pod's container starts and when it
//     exits (nodestate.LifecycleRecorder), for checkers that order the containers' lives against
//     what the apps did (e2e/nemesis). Events published while it is not running are not in the
//     log; it follows containerd again when containerd comes back.
//   - the containers' output, copied from the kubelet's logs to
//     <log-dir>/<namespace>/<pod>/<container>.log, where it outlives the pod
//     (nodestate.PodLogCopier).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/nodestate"
)

func main() {
	address := flag.String("address", "", "containerd's socket")
	logDir := flag.String("log-dir", "", "where containers.jsonl and the copied container logs are")
	podsDir := flag.String("pods-dir", "", "the kubelet's podLogsDir")
	flag.Parse()
	if *address == "" || *logDir == "" || *podsDir == "" {
		fmt.Fprintln(os.Stderr, "usage: kshard-node-recorder --address <containerd socket> --log-dir <dir> --pods-dir <dir>")
		os.Exit(2)
	}
	log, err := nodestate.OpenLifecycleLog(*logDir)
	if err != nil {
		klog.ErrorS(err, "opening the lifecycle log")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go copyLogs(ctx, &nodestate.PodLogCopier{PodsDir: *podsDir, LogDir: *logDir})
	r := &nodestate.LifecycleRecorder{Log: log, Lookup: func(id string) (nodestate.PodContainer, bool, error) {
		return lookup(ctx, *address, id)
	}}
	for ctx.Err() == nil {
		if err := follow(ctx, *address, r); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "following containerd's events; again in 1 s")
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// copyLogs polls the kubelet's logs until ctx ends, and once more then.
func copyLogs(ctx context.Context, c *nodestate.PodLogCopier) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.Poll(); err != nil {
			klog.ErrorS(err, "copying container logs")
		}
		select {
		case <-ctx.Done():
			_ = c.Poll()
			return
		case <-tick.C:
		}
	}
}

// follow runs `ctr events` until it ends, handing every line to the recorder.
func follow(ctx context.Context, address string, r *nodestate.LifecycleRecorder) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", address, "events")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	klog.InfoS("following containerd's events", "address", address)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		e, err := nodestate.ParseCtrEvent(sc.Text())
		if err != nil {
			klog.ErrorS(err, "skipping a line")
			continue
		}
		if err := r.Handle(e); err != nil {
			klog.ErrorS(err, "recording an event", "topic", e.Topic)
		}
	}
	return cmd.Wait()
}

// lookup reads a container's labels (`ctr containers info`).
func lookup(ctx context.Context, address, id string) (nodestate.PodContainer, bool, error) {
	out, err := exec.CommandContext(ctx, "ctr", "--address", address, "--namespace", "k8s.io",
		"containers", "info", id).Output()
	if err != nil {
		return nodestate.PodContainer{}, false, fmt.Errorf("ctr containers info: %w", err)
	}
	var info struct{ Labels map[string]string }
	if err := json.Unmarshal(out, &info); err != nil {
		return nodestate.PodContainer{}, false, err
	}
	c, ok := nodestate.PodContainerOf(info.Labels)
	return c, ok, nil
}
