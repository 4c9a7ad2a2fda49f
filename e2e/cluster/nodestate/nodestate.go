// Package nodestate is what the local cluster's node records for the tests and for a look after
// a run, and how other programs read it: the container lifecycle log (containers.jsonl), the
// containers' output kept past their pods, and where the cgroup v2 hierarchy is. The node's
// recorder (cmd/kshard-node-recorder) writes the files; the fault tool (e2e/cluster/fault), the
// randomized fault suite and the tests read them. It needs no API server.
package nodestate

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ContainerEventsFile is the container lifecycle log in the cluster's log directory.
func ContainerEventsFile(logDir string) string { return filepath.Join(logDir, "containers.jsonl") }

// Cgroup2Mount returns where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
// /sys/fs/cgroup/unified on a machine with hybrid cgroups).
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: id parent dev root mountpoint options ... - fstype source options
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup v2 hierarchy is mounted (the fault tool needs one to find a container's processes)")
}
