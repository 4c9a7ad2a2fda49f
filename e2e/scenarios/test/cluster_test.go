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
	kshardNS       string
	commit         string
	installSeconds string

	// The example app under test (COUNTER_APP, chosen by run.sh from e2e/counter-apps.sh; cpp,
	// the C++ counter, by default). Its Deployment, ShardMap and ServiceAccount are all named
	// counterName in namespace counterNS, its pods are labelled app.kubernetes.io/name=
	// <counterName>, its image repository counterImage has a tag per version of the rolling
	// update, and its pods append their activations and stops to the shared file eventLog.
	counterApp   string
	counterNS    string
	counterName  string
	counterImage string
	eventLog     string
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
		kshardNS:       envOr("KSHARD_NAMESPACE", "kshard-system"),
		commit:         os.Getenv("KSHARD_COMMIT"),
		installSeconds: os.Getenv("KSHARD_INSTALL_SECONDS"),
		counterApp:     envOr("COUNTER_APP", "cpp"),
		counterNS:      envOr("COUNTER_NAMESPACE", "demo"),
		counterName:    envOr("COUNTER_NAME", "counter"),
		counterImage:   envOr("COUNTER_IMAGE", "kshard/counter"),
		eventLog:       envOr("KSHARD_COUNTER_EVENT_LOG", "/tmp/kshard-counter/events.log"),
	}
}

// counterLabels selects the app's pods.
func (c config) counterLabels() string { return kube.AppSelector(c.counterName) }

// counterImageOf is the app's image of a version of the rolling update.
func (c config) counterImageOf(version string) string { return c.counterImage + ":" + version }

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
