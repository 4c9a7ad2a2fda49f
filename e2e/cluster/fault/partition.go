package fault

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
)

// A partition is a set of DROP rules in the pod's own network namespace (iptables, nf_tables
// backend), in two chains of its filter table that INPUT and OUTPUT jump to first. Nothing on the
// host changes, and the rules go with the namespace. Every packet is dropped, not only new
// connections, so established connections stall too (as on a cut link: no RST, no FIN; a sender
// retransmits until its own timeout).
const (
	chainIn  = "KSHARD-FAULT-IN"
	chainOut = "KSHARD-FAULT-OUT"
)

// Target is what a pod is partitioned from: every packet to and from IP, or with Port, TCP to and
// from IP:Port only (the connections whose far end is that port).
type Target struct {
	IP   net.IP
	Port int // 0: all traffic with IP
}

// APIServer is the API server as pods reach it, 10.244.0.1:6443 (TCP): the rest of the node's
// address (probes come from it, the kubelet API is on it) stays reachable.
func APIServer() Target { return Target{IP: net.IPv4(10, 244, 0, 1), Port: 6443} }

// kubernetesService is the API server as the real node's pods reach it: the kubernetes
// Service's address, which the node rewrites to APIServer (e2e/cluster/node.sh).
func kubernetesService() Target { return Target{IP: net.IPv4(10, 96, 0, 1), Port: 443} }

// expand adds the kubernetes Service's address to a partition from the API server: pods' packets
// to the API server leave them with that address.
func expand(targets []Target) []Target {
	out := append([]Target(nil), targets...)
	for _, t := range targets {
		if t.IP.Equal(APIServer().IP) && t.Port == APIServer().Port {
			out = append(out, kubernetesService())
		}
	}
	return out
}

// PodTarget is every packet to and from a pod's IP.
func PodTarget(ip string) (Target, error) { return ParseTarget(ip) }

func (t Target) String() string {
	if t.Port == 0 {
		return t.IP.String()
	}
	return net.JoinHostPort(t.IP.String(), strconv.Itoa(t.Port))
}

// ParseTarget reads "api" (APIServer), an IPv4 address, or ipv4:port.
func ParseTarget(s string) (Target, error) {
	if s == "api" {
		return APIServer(), nil
	}
	host, port := s, 0
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("target %q: port must be 1-65535", s)
		}
		host, port = h, n
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return Target{}, fmt.Errorf("target %q: want api, an IPv4 address or ipv4:port", s)
	}
	return Target{IP: ip.To4(), Port: port}, nil
}

// dropRules are the rules (iptables arguments after the chain) that cut the pod off from t:
// outgoing packets to it, incoming packets from it.
func dropRules(t Target) (out, in []string) {
	ip := t.IP.String() + "/32"
	out, in = []string{"-d", ip}, []string{"-s", ip}
	if t.Port != 0 {
		port := strconv.Itoa(t.Port)
		out = append(out, "-p", "tcp", "--dport", port)
		in = append(in, "-p", "tcp", "--sport", port)
	}
	return append(out, "-j", "DROP"), append(in, "-j", "DROP")
}

// jumps are the rules that send every packet through the fault chains, first.
var jumps = [][2]string{{"INPUT", chainIn}, {"OUTPUT", chainOut}}

// iptables runs iptables in the pod's network namespace.
func (p *Pod) iptables(args ...string) error {
	ns := p.NetNS()
	if ns == "" {
		return fmt.Errorf("%s has no network namespace yet (its sandbox is not created)", p)
	}
	full := append([]string{"netns", "exec", ns, "iptables", "-w", "5"}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ensure appends the rule to the chain unless it is there.
func (p *Pod) ensure(chain string, rule []string) error {
	if p.iptables(append([]string{"-C", chain}, rule...)...) == nil {
		return nil
	}
	return p.iptables(append([]string{"-A", chain}, rule...)...)
}

// Partition drops every packet between the pod and the targets, both ways, established
// connections included, until Heal. Targets add up over calls; repeating one is harmless.
func (p *Pod) Partition(targets []Target) error {
	if len(targets) == 0 {
		return errors.New("partition: no target")
	}
	for _, j := range jumps {
		if p.iptables("-S", j[1]) != nil {
			if err := p.iptables("-N", j[1]); err != nil {
				return err
			}
		}
		if p.iptables("-C", j[0], "-j", j[1]) != nil {
			if err := p.iptables("-I", j[0], "1", "-j", j[1]); err != nil {
				return err
			}
		}
	}
	for _, t := range expand(targets) {
		out, in := dropRules(t)
		if err := p.ensure(chainOut, out); err != nil {
			return err
		}
		if err := p.ensure(chainIn, in); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes what Partition added (the jumps and the two chains), and nothing else. A pod with
// no partition, or whose network namespace is already gone, has nothing to heal.
func (p *Pod) Heal() error {
	if p.NetNS() == "" {
		return nil
	}
	for _, j := range jumps {
		for p.iptables("-C", j[0], "-j", j[1]) == nil {
			if err := p.iptables("-D", j[0], "-j", j[1]); err != nil {
				return err
			}
		}
		if p.iptables("-S", j[1]) == nil {
			if err := p.iptables("-F", j[1]); err != nil {
				return err
			}
			if err := p.iptables("-X", j[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Partitions lists the pod's partition rules as iptables prints them (none when healed).
func (p *Pod) Partitions() ([]string, error) {
	var rules []string
	for _, j := range jumps {
		ns := p.NetNS()
		if ns == "" {
			return nil, nil
		}
		out, err := exec.Command("ip", "netns", "exec", ns, "iptables", "-w", "5", "-S", j[1]).Output()
		if err != nil {
			continue // no such chain: not partitioned
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(line, "-A ") {
				rules = append(rules, line)
			}
		}
	}
	return rules, nil
}
