// Command kshard-fault injects faults into pods of the local cluster's node: e2e/cluster/fault.sh
// runs it (see e2e/cluster/README.md, "Fault injection", and package fault).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"kshard.local/e2e/cluster/fault"
)

const usage = `usage: kshard-fault [--cluster-dir DIR] <verb> <args>

  kill <ns> <pod> <container>      SIGKILL every process of the container (it restarts per restartPolicy)
  crash <ns> <pod>                 SIGKILL every process of every container of the pod at once
  freeze <ns> <pod> <container>    freeze its processes (cgroup v2 freezer)
  thaw <ns> <pod> <container>      let them run again
  partition <ns> <pod> <target>... drop all traffic between the pod and each target, both ways:
                                   api (the API server, 10.244.0.1:6443), <pod IP>, or <ip>:<port> (TCP)
  heal <ns> <pod>                  remove the pod's partitions
  orphan <ns> <pod>                keep the pod running when its object is deleted, until release
  release <ns> <pod>               release its orphans: the kubelet ends those whose object is gone
  pods                             list the node's pods: uid, IP, orphaned, partition rules
`

// verb is one command: how many arguments it takes (-1: at least 3) and what it does.
type verb struct {
	args int
	run  func(n *fault.Node, a []string) error
}

var verbs = map[string]verb{
	"kill":   {3, func(n *fault.Node, a []string) error { return n.Kill(a[0], a[1], a[2]) }},
	"crash":  {2, crash},
	"freeze": {3, func(n *fault.Node, a []string) error { return n.Freeze(a[0], a[1], a[2]) }},
	"thaw":   {3, func(n *fault.Node, a []string) error { return n.Thaw(a[0], a[1], a[2]) }},
	"partition": {-1, func(n *fault.Node, a []string) error {
		var targets []fault.Target
		for _, s := range a[2:] {
			t, err := fault.ParseTarget(s)
			if err != nil {
				return err
			}
			targets = append(targets, t)
		}
		return n.Partition(a[0], a[1], targets)
	}},
	"heal":    {2, func(n *fault.Node, a []string) error { return n.Heal(a[0], a[1]) }},
	"orphan":  {2, func(n *fault.Node, a []string) error { return n.Orphan(a[0], a[1]) }},
	"release": {2, func(n *fault.Node, a []string) error { return n.Release(a[0], a[1]) }},
	"pods":    {0, listPods},
}

func crash(n *fault.Node, a []string) error {
	p, err := n.Pod(a[0], a[1])
	if err != nil {
		return err
	}
	killed, err := p.Crash()
	if err == nil && killed == 0 {
		err = fmt.Errorf("%s: %w", p, fault.ErrNotRunning)
	}
	if err == nil {
		fmt.Printf("SIGKILLed the processes of %d container(s) of %s\n", killed, p)
	}
	return err
}

func listPods(n *fault.Node, _ []string) error {
	pods, err := n.Pods()
	if err != nil {
		return err
	}
	for _, p := range pods {
		state := ""
		if p.Orphaned() {
			state = " orphaned"
		}
		rules, _ := p.Partitions()
		fmt.Printf("%s/%s uid=%s ip=%s containers=%s%s\n", p.Namespace, p.Name, p.UID, p.IP(),
			strings.Join(p.Containers(), ","), state)
		for _, r := range rules {
			fmt.Printf("  %s\n", r)
		}
	}
	return nil
}

func main() {
	clusterDir := flag.String("cluster-dir", ".cluster", "the cluster's state directory")
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	v, ok := verbs[args[0]]
	if !ok || (v.args >= 0 && len(args)-1 != v.args) || (v.args < 0 && len(args)-1 < 3) {
		fmt.Fprintf(os.Stderr, "kshard-fault: bad arguments %q\n%s", args, usage)
		os.Exit(2)
	}
	n, err := fault.Open(*clusterDir)
	if err == nil {
		err = v.run(n, args[1:])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kshard-fault %s: %v\n", args[0], err)
		os.Exit(1)
	}
}
