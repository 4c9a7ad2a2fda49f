package agent

import (
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
)

// Network gives each pod a network namespace with one veth interface (eth0) on the node's bridge
// and an address of the pod range. Pods reach each other and the node's bridge address; they get
// no default route, and the bridge does not forward (see up.sh), so nothing leaves the machine.
type Network struct {
	Bridge  string
	Gateway net.IP     // the bridge's own address (API server, probes, kubelet port)
	Range   *net.IPNet // the pod range, e.g. 10.244.0.0/16
	Prefix  string     // network namespace name prefix, e.g. "kshard-"

	mu   sync.Mutex
	next uint32
	used map[uint32]bool
}

// Sandbox is a pod's network namespace.
type Sandbox struct {
	NetNS    string // name under /run/netns
	HostVeth string
	IP       net.IP
}

// NetNSPath is the namespace's bind-mount path, which setns(2) opens.
func (s *Sandbox) NetNSPath() string { return "/run/netns/" + s.NetNS }

func ipToU32(ip net.IP) uint32 { return binary.BigEndian.Uint32(ip.To4()) }
func u32ToIP(v uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip
}

// allocate hands out addresses round-robin, so that an address just released (which endpoint
// controllers may still list) is not reused at once.
func (n *Network) allocate() (net.IP, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.used == nil {
		n.used = map[uint32]bool{}
	}
	base := ipToU32(n.Range.IP.Mask(n.Range.Mask))
	ones, bits := n.Range.Mask.Size()
	size := uint32(1) << uint(bits-ones)
	gw := ipToU32(n.Gateway)
	for i := uint32(0); i < size; i++ {
		off := (n.next + i) % size
		cand := base + off
		if off == 0 || off == size-1 || cand == gw || n.used[cand] {
			continue
		}
		n.used[cand] = true
		n.next = off + 1
		return u32ToIP(cand), nil
	}
	return nil, fmt.Errorf("pod range %s is exhausted", n.Range)
}

func (n *Network) release(ip net.IP) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.used, ipToU32(ip))
}

func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CreateSandbox makes the namespace "<prefix><id>" with eth0 on the bridge. id must be short (the
// host-side veth name is limited to 15 bytes).
func (n *Network) CreateSandbox(id string) (*Sandbox, error) {
	ip, err := n.allocate()
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{NetNS: n.Prefix + id, HostVeth: "vk" + id, IP: ip}
	peer := "vp" + id
	ones, _ := n.Range.Mask.Size()
	steps := [][]string{
		{"netns", "add", sb.NetNS},
		{"link", "add", sb.HostVeth, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", sb.NetNS},
		{"link", "set", sb.HostVeth, "master", n.Bridge, "up"},
		{"-n", sb.NetNS, "link", "set", peer, "name", "eth0"},
		{"-n", sb.NetNS, "addr", "add", fmt.Sprintf("%s/%d", ip, ones), "dev", "eth0"},
		{"-n", sb.NetNS, "link", "set", "eth0", "up"},
		{"-n", sb.NetNS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := runIP(s...); err != nil {
			n.DeleteSandbox(sb)
			return nil, err
		}
	}
	return sb, nil
}

// DeleteSandbox removes the namespace (which takes the veth pair with it) and frees the address.
// Safe to call on a half-created sandbox.
func (n *Network) DeleteSandbox(sb *Sandbox) {
	_ = runIP("netns", "del", sb.NetNS)
	_ = runIP("link", "del", sb.HostVeth)
	n.release(sb.IP)
}

// DeleteAllSandboxes removes every namespace with the prefix: what a previous run of the agent left.
func (n *Network) DeleteAllSandboxes() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.HasPrefix(fields[0], n.Prefix) {
			_ = runIP("netns", "del", fields[0])
		}
	}
}
