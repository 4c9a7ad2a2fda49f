package fault

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTargetReadsAPIAddressesAndPorts(t *testing.T) {
	for in, want := range map[string]string{
		"api":             "10.244.0.1:6443",
		"10.244.0.7":      "10.244.0.7",
		"10.244.0.7:8080": "10.244.0.7:8080",
	} {
		got, err := ParseTarget(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "pod-a", "10.244.0.7:0", "10.244.0.7:65536", "10.244.0.7:http", "::1", "[::1]:80"} {
		if got, err := ParseTarget(in); err == nil {
			t.Errorf("ParseTarget(%q) = %v, want an error", in, got)
		}
	}
}

func TestDropRulesCutBothDirectionsOfEveryPacket(t *testing.T) {
	ip, _ := ParseTarget("10.244.0.7")
	out, in := dropRules(ip)
	if want := "-d 10.244.0.7/32 -j DROP"; strings.Join(out, " ") != want {
		t.Errorf("outgoing rule %v, want %s", out, want)
	}
	if want := "-s 10.244.0.7/32 -j DROP"; strings.Join(in, " ") != want {
		t.Errorf("incoming rule %v, want %s", in, want)
	}
	out, in = dropRules(APIServer())
	wantOut := []string{"-d", "10.244.0.1/32", "-p", "tcp", "--dport", "6443", "-j", "DROP"}
	wantIn := []string{"-s", "10.244.0.1/32", "-p", "tcp", "--sport", "6443", "-j", "DROP"}
	if !reflect.DeepEqual(out, wantOut) || !reflect.DeepEqual(in, wantIn) {
		t.Errorf("API server rules %v %v, want %v %v", out, in, wantOut, wantIn)
	}
	// No rule matches connection state: established connections are cut as well.
	for _, r := range append(out, in...) {
		if r == "--state" || r == "--ctstate" || r == "NEW" {
			t.Errorf("rule %v matches connection state", out)
		}
	}
}
