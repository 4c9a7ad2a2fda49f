package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProcessSpec is what the agent hands to its own binary re-executed as "run-container": everything
// needed to turn that process into the container's process before exec.
type ProcessSpec struct {
	// CgroupDir is the cgroup v2 directory the process joins first, so that all its descendants can
	// be killed at once ("" when the machine has no cgroup v2).
	CgroupDir  string   `json:"cgroupDir,omitempty"`
	NetNSPath  string   `json:"netnsPath"`
	Hostname   string   `json:"hostname,omitempty"` // set in the process's own UTS namespace
	Mounts     []Mount  `json:"mounts,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
}

// Mount is one bind mount of a materialised volume (or a file of it) at the container's mountPath.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// RunContainerMain is the "run-container <spec.json>" entry point. It is started by the agent in
// new mount and UTS namespaces (clone flags), so its bind mounts and hostname are its own. It never
// returns on success: it execs the container's program.
func RunContainerMain(specPath string) {
	// setns(CLONE_NEWNET) applies to the calling thread only, and exec keeps the calling thread:
	// both must happen on the same locked thread.
	runtime.LockOSThread()
	if err := runContainer(specPath); err != nil {
		fmt.Fprintf(os.Stderr, "kshard-node-agent: cannot start container: %v\n", err)
		os.Exit(128)
	}
}

func runContainer(specPath string) error {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec ProcessSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("parse %s: %w", specPath, err)
	}
	if spec.CgroupDir != "" {
		if err := os.WriteFile(filepath.Join(spec.CgroupDir, "cgroup.procs"), []byte("0"), 0o644); err != nil {
			return fmt.Errorf("join cgroup %s: %w", spec.CgroupDir, err)
		}
	}
	// Mounts made below must not propagate back to the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	for _, m := range spec.Mounts {
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_REC)
			if err := unix.Mount("", m.Target, "", flags, ""); err != nil {
				return fmt.Errorf("remount %s read-only: %w", m.Target, err)
			}
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
	}
	ns, err := os.Open(spec.NetNSPath)
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", spec.NetNSPath, err)
	}
	if spec.WorkingDir != "" {
		if err := os.Chdir(spec.WorkingDir); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("no command")
	}
	return syscall.Exec(spec.Argv[0], spec.Argv, spec.Env)
}
