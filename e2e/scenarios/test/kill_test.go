package scenariotest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"kshard.local/e2e/cluster/nodestate"
)

// podKiller SIGKILLs every process of a pod of the local cluster, as e2e/cluster/kill-pod.sh
// does (cgroup.kill of each container's cgroup), but from the test, so that it knows to the
// millisecond when the processes died and can keep them dead: the node agent restarts killed
// containers at once (restartPolicy Always), and a crashed node's pod does not come back.
type podKiller struct {
	podDir    string // .cluster/agent/pods/<uid>
	cgroupDir string // <cgroup2>/kshard/pod-<uid>
}

func newPodKiller(clusterDir, ns, name string) (*podKiller, error) {
	files, _ := filepath.Glob(filepath.Join(clusterDir, "agent", "pods", "*", "pod"))
	uid := ""
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == ns+"/"+name {
			uid = filepath.Base(filepath.Dir(f))
		}
	}
	if uid == "" {
		return nil, fmt.Errorf("pod %s/%s does not run on the node (no %s/agent/pods/*/pod names it)", ns, name, clusterDir)
	}
	root, err := nodestate.Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	return &podKiller{podDir: filepath.Join(clusterDir, "agent", "pods", uid),
		cgroupDir: filepath.Join(root, "kshard", "pod-"+uid)}, nil
}

// kill SIGKILLs every process of every container of the pod; it returns how many containers had
// processes.
func (k *podKiller) kill() (int, error) {
	dirs, err := filepath.Glob(filepath.Join(k.cgroupDir, "*", "cgroup.kill"))
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, killFile := range dirs {
		procs, err := os.ReadFile(filepath.Join(filepath.Dir(killFile), "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(procs)) == "" {
			continue
		}
		if err := os.WriteFile(killFile, []byte("1"), 0o644); err != nil {
			return killed, fmt.Errorf("%s: %w", killFile, err)
		}
		killed++
	}
	return killed, nil
}

// removed says whether the node agent has removed the pod (its directory or cgroups are gone).
func (k *podKiller) removed() bool {
	_, errDir := os.Stat(k.podDir)
	_, errCg := os.Stat(k.cgroupDir)
	return os.IsNotExist(errDir) || os.IsNotExist(errCg)
}

// keepDead kills whatever the agent restarts in the pod until stop is closed or the agent
// removed the pod; every kill that found processes is passed to onKill. done is closed at the end.
func (k *podKiller) keepDead(stop <-chan struct{}, onKill func(time.Time, int)) (done <-chan struct{}) {
	d := make(chan struct{})
	go func() {
		defer close(d)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if n, _ := k.kill(); n > 0 {
				onKill(time.Now(), n)
			}
			if k.removed() {
				return
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return d
}
