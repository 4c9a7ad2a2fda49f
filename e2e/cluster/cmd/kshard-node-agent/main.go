// Command kshard-node-agent is the kubelet of kshard's local test cluster: it registers one Node,
// keeps it Ready, binds unscheduled pods to it, and runs their containers as processes, each pod in
// its own network namespace. "kshard-node-agent run-container <spec>" is its internal helper.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"kshard.local/e2e/cluster/agent"
	"kshard.local/e2e/cluster/nodestate"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "run-container" {
		agent.RunContainerMain(os.Args[2])
		return
	}
	var cfg agent.Config
	var kubeconfig, schedulerKubeconfig, images, repoRoot, bridge, podCIDR, netnsPrefix string
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the node's identity")
	flag.StringVar(&schedulerKubeconfig, "scheduler-kubeconfig", "", "kubeconfig used to bind pods (NodeRestriction forbids a node to); default: --kubeconfig")
	flag.StringVar(&cfg.NodeName, "node-name", "kshard-node", "name of the Node")
	flag.StringVar(&cfg.NodeIP, "node-ip", "10.244.0.1", "the node's address: the bridge's address")
	flag.StringVar(&cfg.APIHost, "api-host", "10.244.0.1", "KUBERNETES_SERVICE_HOST given to pods")
	flag.IntVar(&cfg.APIPort, "api-port", 6443, "KUBERNETES_SERVICE_PORT given to pods")
	flag.StringVar(&cfg.StateDir, "state-dir", ".cluster/agent", "directory for pod state")
	flag.StringVar(&cfg.LogDir, "log-dir", ".cluster/logs", "container logs go to <dir>/<namespace>/<pod>/<container>.log")
	flag.IntVar(&cfg.KubeletPort, "kubelet-port", 10250, "port of the kubelet API (logs); 0 disables it")
	flag.StringVar(&cfg.KubeletCert, "kubelet-cert", "", "serving certificate of the kubelet API")
	flag.StringVar(&cfg.KubeletKey, "kubelet-key", "", "its key")
	flag.StringVar(&cfg.ClientCA, "client-ca", "", "CA of the clients of the kubelet API")
	flag.BoolVar(&cfg.BindPods, "bind-pods", true, "bind unscheduled pods to this node (no kube-scheduler runs)")
	flag.DurationVar(&cfg.VolumeResync, "volume-resync", 30*time.Second, "how often secret/configMap/downwardAPI/token volumes are refreshed")
	flag.StringVar(&images, "images", "e2e/images.yaml", "image map: image → executable")
	flag.StringVar(&repoRoot, "repo-root", ".", "executables in the image map are relative to this")
	flag.StringVar(&bridge, "bridge", "kshard0", "bridge the pods are attached to (created by up.sh)")
	flag.StringVar(&podCIDR, "pod-cidr", "10.244.0.0/16", "pod address range (the bridge's subnet)")
	flag.StringVar(&netnsPrefix, "netns-prefix", "kshard-", "prefix of the pods' network namespace names")
	flag.StringVar(&agent.KubeletVersion, "kubelet-version", agent.KubeletVersion, "version the Node reports")
	klog.InitFlags(nil)
	flag.Parse()

	if err := run(cfg, kubeconfig, schedulerKubeconfig, images, repoRoot, bridge, podCIDR, netnsPrefix); err != nil {
		fmt.Fprintln(os.Stderr, "kshard-node-agent:", err)
		os.Exit(1)
	}
}

func run(cfg agent.Config, kubeconfig, schedulerKubeconfig, images, repoRoot, bridge, podCIDR, netnsPrefix string) error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	binder := client
	if schedulerKubeconfig != "" {
		bcfg, err := clientcmd.BuildConfigFromFlags("", schedulerKubeconfig)
		if err != nil {
			return err
		}
		if binder, err = kubernetes.NewForConfig(bcfg); err != nil {
			return err
		}
	}
	_, cidr, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	gw := net.ParseIP(cfg.NodeIP)
	if gw == nil || !cidr.Contains(gw) {
		return fmt.Errorf("--node-ip %q must be an address of --pod-cidr %s", cfg.NodeIP, podCIDR)
	}
	cgRoot, err := agent.FindCgroupRoot()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, p := range []*string{&cfg.StateDir, &cfg.LogDir, &images, &repoRoot} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return err
	}
	lifecycle, err := nodestate.OpenLifecycleLog(cfg.LogDir)
	if err != nil {
		return fmt.Errorf("container lifecycle log: %w", err)
	}
	a := &agent.Agent{
		Cfg: cfg, Client: client, Binder: binder, SelfExe: self, Lifecycle: lifecycle,
		Images:  &agent.ImageResolver{Path: images, RepoRoot: repoRoot},
		Net:     &agent.Network{Bridge: bridge, Gateway: gw, Range: cidr, Prefix: netnsPrefix},
		Cgroups: &agent.Cgroups{Root: cgRoot},
	}
	if err := a.CleanupLeftovers(); err != nil {
		return fmt.Errorf("cleaning up after a previous run: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	err = a.Run(ctx)
	// Like a kubelet, stopping the agent leaves containers running; cluster-down removes them.
	return err
}
