// kshard-pause: the pod sandbox's process on the local cluster's real node (the image containerd's
// CRI plugin runs as each pod's sandbox, e2e/cluster/README.md). It holds the pod's namespaces
// open and does nothing: it waits for SIGTERM or SIGINT and exits 0, and, as the pid 1 of a pod
// that shares its process namespace, reaps the zombies it inherits.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
