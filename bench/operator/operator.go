package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"kshard.local/e2e/support/httpcall"
)

// ---------------------------------------------------------------------------------------------
// The operator

type operatorProc struct {
	cmd            *exec.Cmd
	manager, admin string
	logPath        string
	exited         chan struct{}
	peakKiB        atomic.Int64
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOperator(ctx context.Context, o options) (*operatorProc, error) {
	mp, err := freePort()
	if err != nil {
		return nil, err
	}
	ap, err := freePort()
	if err != nil {
		return nil, err
	}
	logDir := o.logDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "kshard-operator-scale-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	op := &operatorProc{
		manager: fmt.Sprintf("127.0.0.1:%d", mp), admin: fmt.Sprintf("127.0.0.1:%d", ap),
		logPath: filepath.Join(logDir, "operator.log"), exited: make(chan struct{}),
	}
	logFile, err := os.Create(op.logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", o.kubeconfig,
		"--manager-listen", op.manager, "--advertise-address", op.manager,
		"--admin-listen", op.admin,
		"--lease-namespace", o.namespace, "--watch-namespace", o.namespace}
	op.cmd = exec.Command(o.operatorBin, append(args, strings.Fields(o.operatorFlags)...)...)
	// Its tokens for the sidecars come from the namespace's default ServiceAccount (one per map).
	op.cmd.Env = append(os.Environ(), "POD_NAME=kshard-operator-scale", "POD_NAMESPACE="+o.namespace,
		"POD_SERVICE_ACCOUNT=default")
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	// An operator that outlived an interrupted run would lead the next run's map too: it has
	// the same identity.
	op.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := op.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.operatorBin, err)
	}
	log.Printf("operator started (pid %d, manager API %s, log %s)", op.cmd.Process.Pid, op.manager, op.logPath)
	go func() {
		_ = op.cmd.Wait()
		logFile.Close()
		close(op.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-op.exited:
			return nil, fmt.Errorf("the operator exited while starting; log: %s", op.logPath)
		default:
		}
		if code, _ := httpcall.Get(2*time.Second, "http://"+op.admin+"/readyz"); code == 200 {
			return op, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			op.stop()
			return nil, fmt.Errorf("the operator did not answer /readyz within 60 s; log: %s", op.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rss reads the operator's peak (VmHWM) and current (VmRSS) resident set in KiB.
func (op *operatorProc) rss() (peak, current int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", op.cmd.Process.Pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			peak = v
		case "VmRSS:":
			current = v
		}
	}
	return peak, current
}

func (op *operatorProc) stop() {
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
	}
}

// cpuSeconds is the CPU time (utime + stime) of process pid in seconds, -1 when unreadable.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// After "pid (comm) ": state is field 3, utime 14, stime 15 (proc(5)); comm may hold blanks.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return -1
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return float64(utime+stime) / clockTicks
}

// clockTicks is sysconf(_SC_CLK_TCK), 100 on Linux whatever the kernel's HZ.
const clockTicks = 100

// findProcess is the pid of a process whose name (/proc/<pid>/comm) is name; 0 when none.
func findProcess(name string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.TrimSpace(string(comm)) == name {
			return pid
		}
	}
	return 0
}
