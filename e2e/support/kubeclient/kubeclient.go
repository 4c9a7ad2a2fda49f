// Package kubeclient makes the clients of the cluster that a kubeconfig file names. One copy for
// the end-to-end suites and the benchmarks (e2e/support/README.md).
package kubeclient

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Limits of the clients' requests. A zero field keeps client-go's default: 5 requests a second
// in bursts of 10, no timeout.
type Limits struct {
	QPS     float32
	Burst   int
	Timeout time.Duration
}

// Clients of one cluster, and the configuration they were made from.
type Clients struct {
	Config    *rest.Config
	Clientset *kubernetes.Clientset
	Dynamic   dynamic.Interface // for the ShardMaps, which have no typed client
}

// Config reads the kubeconfig file (its current context) and applies the limits.
func Config(kubeconfig string, limits Limits) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if limits.QPS != 0 {
		cfg.QPS = limits.QPS
	}
	if limits.Burst != 0 {
		cfg.Burst = limits.Burst
	}
	if limits.Timeout != 0 {
		cfg.Timeout = limits.Timeout
	}
	return cfg, nil
}

// New makes the clients of cfg.
func New(cfg *rest.Config) (Clients, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Config: cfg, Clientset: cs, Dynamic: dyn}, nil
}

// Load makes the clients of the cluster of the kubeconfig file. An error reading the file says
// "kubeconfig <file>: ...".
func Load(kubeconfig string, limits Limits) (Clients, error) {
	cfg, err := Config(kubeconfig, limits)
	if err != nil {
		return Clients{}, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return New(cfg)
}

// ForTest is Load for a test: it fails t with "kubeconfig: ..." when the file cannot be read, or
// with the error of making the clients.
func ForTest(t testing.TB, kubeconfig string, limits Limits) Clients {
	t.Helper()
	cfg, err := Config(kubeconfig, limits)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
