// Package nodestate is the node agent's state on disk as other programs read it: where a pod's
// directory is and what it holds, the orphan markers the fault tool writes, the cgroup of a
// container, and the container lifecycle log (containers.jsonl). The agent writes these files;
// the fault tool (e2e/cluster/fault) and tests read them. It needs no API server.
package nodestate

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Files of a pod's directory <state dir>/pods/<uid>/ (the agent removes the directory once the
// pod's processes are gone and its sandbox is deleted).
const (
	PodNameFile  = "pod"      // "<namespace>/<name>\n"
	PodNetNSFile = "netns"    // the pod's network namespace name, once its sandbox exists
	PodIPFile    = "ip"       // the pod's IP, once its sandbox exists
	OrphanedFile = "orphaned" // present while the agent holds the pod as an orphan (its acknowledgement)
)

// PodDir is the directory of the pod with that UID.
func PodDir(stateDir, uid string) string { return filepath.Join(stateDir, "pods", uid) }

// PodsGlob matches the name file of every pod on the node.
func PodsGlob(stateDir string) string { return filepath.Join(stateDir, "pods", "*", PodNameFile) }

// OrphansDir holds one marker per orphaned pod, named by its UID (written by the fault tool).
func OrphansDir(stateDir string) string { return filepath.Join(stateDir, "orphans") }

// OrphanMarker is the marker file of the pod with that UID.
func OrphanMarker(stateDir, uid string) string { return filepath.Join(OrphansDir(stateDir), uid) }

// ContainerEventsFile is the container lifecycle log in the cluster's log directory.
func ContainerEventsFile(logDir string) string { return filepath.Join(logDir, "containers.jsonl") }

// CgroupRootName is the directory under the cgroup v2 mount that holds every container's cgroup:
// <mount>/kshard/pod-<uid>/<container>.
const CgroupRootName = "kshard"

// ContainerCgroup is the cgroup directory of one container, under the agent's cgroup root.
func ContainerCgroup(cgroupRoot, uid, container string) string {
	return filepath.Join(PodCgroup(cgroupRoot, uid), container)
}

// PodCgroup is the parent cgroup of a pod's containers.
func PodCgroup(cgroupRoot, uid string) string { return filepath.Join(cgroupRoot, "pod-"+uid) }

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
	return "", errors.New("no cgroup v2 hierarchy is mounted (the node agent needs one to track container processes)")
}
