package scenariotest

import (
	"context"
	"os"

	"kshard.local/e2e/scenarios/kube"
)

// config is what run.sh passes in the environment.
type config struct {
	kubeconfig     string
	repoRoot       string
	clusterDir     string
	reportDir      string
	kubectl        string
	counterNS      string
	kshardNS       string
	eventLog       string
	commit         string
	installSeconds string
}

func loadConfig() config {
	wd, _ := os.Getwd() // e2e/scenarios/test
	root := envOr("KSHARD_REPO_ROOT", wd+"/../../..")
	return config{
		kubeconfig:     os.Getenv("KUBECONFIG"),
		repoRoot:       root,
		clusterDir:     envOr("KSHARD_CLUSTER_DIR", root+"/.cluster"),
		reportDir:      envOr("KSHARD_REPORT_DIR", wd+"/../report"),
		kubectl:        envOr("KUBECTL", "kubectl"),
		counterNS:      envOr("COUNTER_NAMESPACE", "demo"),
		kshardNS:       envOr("KSHARD_NAMESPACE", "kshard-system"),
		eventLog:       envOr("KSHARD_COUNTER_EVENT_LOG", "/tmp/kshard-counter/events.log"),
		commit:         os.Getenv("KSHARD_COMMIT"),
		installSeconds: os.Getenv("KSHARD_INSTALL_SECONDS"),
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func bg() context.Context { return context.Background() }

// apiCtx bounds one API call, so that a call made while the API server is away fails instead
// of hanging.
func apiCtx() (context.Context, context.CancelFunc) { return kube.Ctx() }
