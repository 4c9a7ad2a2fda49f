package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// KubeletVersion is what the Node reports; it matches the control plane's version.
var KubeletVersion = "v0.0.0"

const leaseDuration = 40 // seconds, the kubelet's default

func nodeCapacity() v1.ResourceList {
	mem := int64(0)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				mem = kb * 1024
			}
		}
		f.Close()
	}
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(mem, resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
		v1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
}

func (a *Agent) nodeStatus() v1.NodeStatus {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(t v1.NodeConditionType, st v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: t, Status: st, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	machineID, _ := os.ReadFile("/etc/machine-id")
	capacity := nodeCapacity()
	return v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions: []v1.NodeCondition{
			cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kshard node agent is posting ready status"),
		},
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: a.Cfg.NodeIP},
			{Type: v1.NodeHostName, Address: a.Cfg.NodeName},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(a.Cfg.KubeletPort)}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID: strings.TrimSpace(string(machineID)), SystemUUID: strings.TrimSpace(string(machineID)),
			BootID: strings.TrimSpace(string(bootID)), KernelVersion: strings.TrimSpace(string(kernel)),
			OSImage: "kshard local node (processes)", ContainerRuntimeVersion: "kshard-process://1",
			KubeletVersion: KubeletVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH,
		},
	}
}

// registerNode creates the Node (or refreshes the one a previous run created).
func (a *Agent) registerNode(ctx context.Context) error {
	nodes := a.Client.CoreV1().Nodes()
	for {
		node, err := nodes.Get(ctx, a.Cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.Cfg.NodeName, Labels: map[string]string{
				"kubernetes.io/hostname": a.Cfg.NodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": runtime.GOARCH, "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH,
			}}}
			node, err = nodes.Create(ctx, node, metav1.CreateOptions{})
		}
		if err == nil {
			node.Status = a.nodeStatus()
			_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		}
		if err == nil {
			klog.InfoS("node registered", "node", a.Cfg.NodeName)
			return nil
		}
		klog.InfoS("registering the node failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// heartbeat renews the node's Lease every 10 s and posts the node status every minute (the
// kubelet's rhythm); the node lifecycle controller keeps the node Ready from these.
func (a *Agent) heartbeat(ctx context.Context) {
	lastStatus := time.Now()
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		if err := a.renewLease(ctx); err != nil {
			klog.InfoS("node lease renewal failed", "err", err)
		}
		if time.Since(lastStatus) >= time.Minute {
			if err := a.postNodeStatus(ctx); err != nil {
				klog.InfoS("node status update failed", "err", err)
			} else {
				lastStatus = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) postNodeStatus(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	node, err := a.Client.CoreV1().Nodes().Get(ctx, a.Cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fresh := a.nodeStatus()
	for i := range fresh.Conditions {
		for _, old := range node.Status.Conditions {
			if old.Type == fresh.Conditions[i].Type && old.Status == fresh.Conditions[i].Status {
				fresh.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status = fresh
	_, err = a.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func (a *Agent) renewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leases := a.Client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, a.Cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, nerr := a.Client.CoreV1().Nodes().Get(ctx, a.Cfg.NodeName, metav1.GetOptions{})
		if nerr != nil {
			return nerr
		}
		lease = &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.Cfg.NodeName, Namespace: v1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(a.Cfg.NodeName), LeaseDurationSeconds: ptr.To(int32(leaseDuration)), RenewTime: &now},
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(a.Cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(leaseDuration))
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("lease update: %w", err)
	}
	return nil
}
