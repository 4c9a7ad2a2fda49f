package kubeclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
users:
- name: admin
  user:
    token: not-a-real-token
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadAppliesTheLimits(t *testing.T) {
	c, err := Load(writeKubeconfig(t), Limits{QPS: 50, Burst: 100, Timeout: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Host != "https://127.0.0.1:6443" || c.Config.BearerToken != "not-a-real-token" {
		t.Errorf("host %q, token %q: not the kubeconfig's", c.Config.Host, c.Config.BearerToken)
	}
	if c.Config.QPS != 50 || c.Config.Burst != 100 || c.Config.Timeout != 15*time.Second {
		t.Errorf("QPS %v, burst %d, timeout %s; want 50, 100, 15s", c.Config.QPS, c.Config.Burst, c.Config.Timeout)
	}
	if c.Clientset == nil || c.Dynamic == nil {
		t.Errorf("clients missing: %+v", c)
	}
}

func TestZeroLimitsKeepClientGosDefaults(t *testing.T) {
	cfg, err := Config(writeKubeconfig(t), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 0 || cfg.Burst != 0 || cfg.Timeout != 0 {
		t.Errorf("QPS %v, burst %d, timeout %s; want all unset", cfg.QPS, cfg.Burst, cfg.Timeout)
	}
}

func TestLoadNamesAMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	_, err := Load(missing, Limits{})
	if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig "+missing+": ") {
		t.Fatalf("error %v, want one that starts with \"kubeconfig %s: \"", err, missing)
	}
}
