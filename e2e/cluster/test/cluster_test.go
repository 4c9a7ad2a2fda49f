package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"kshard.local/e2e/support/podstate"
)

func TestControlPlaneReportsThePinnedVersion(t *testing.T) {
	cs, _ := clients(t)
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("/version: %v", err)
	}
	if want := env(t, "KSHARD_EXPECT_K8S_VERSION"); v.GitVersion != want {
		t.Fatalf("/version gitVersion = %q, want %q", v.GitVersion, want)
	}
}

func TestNodeIsReady(t *testing.T) {
	cs, _ := clients(t)
	nodes, err := cs.CoreV1().Nodes().List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no Node registered")
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
		}
		if !ready {
			t.Errorf("node %s is not Ready: %v", n.Name, n.Status.Conditions)
		}
		info := n.Status.NodeInfo
		if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://1.6") ||
			info.KubeletVersion != env(t, "KSHARD_EXPECT_K8S_VERSION") {
			t.Errorf("node %s: want the pinned kubelet on containerd 1.6, got %+v", n.Name, info)
		}
	}
}

// A Deployment of 3 replicas: distinct pod IPs, reachable from the host and from each other, the
// API server reachable from pods with the in-cluster configuration, 3 Service endpoints; then a
// rolling update (old pods get preStop, then SIGTERM, and go) and a deleted pod is replaced.
func TestDeploymentServiceRollingUpdateAndReplacement(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	dep := appDeployment("web", 3, "1.0.0")
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx(t), dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	pods := waitReadyPods(t, cs, ns, "app=web", 3, true, 90*time.Second)

	ips := map[string]string{}
	for _, p := range pods {
		if prev, dup := ips[p.Status.PodIP]; dup || p.Status.PodIP == "" {
			t.Fatalf("pods %s and %s share IP %q", prev, p.Name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = p.Name
	}
	for _, p := range pods {
		if id := p.Status.ContainerStatuses[0].ContainerID; !strings.HasPrefix(id, "containerd://") {
			t.Errorf("pod %s: container ID %q is not containerd's", p.Name, id)
		}
		var who map[string]string
		if err := getJSON(fmt.Sprintf("http://%s:8080/", p.Status.PodIP), &who); err != nil {
			t.Fatalf("pod %s not reachable from the host: %v", p.Name, err)
		}
		if who["pod"] != p.Name || who["namespace"] != ns || who["uid"] != string(p.UID) ||
			who["podIP"] != p.Status.PodIP || who["version"] != "1.0.0" || who["hostname"] != p.Name {
			t.Errorf("pod %s reports %v", p.Name, who)
		}
		for _, q := range pods {
			if q.Name == p.Name {
				continue
			}
			var other map[string]string
			url := fmt.Sprintf("http://%s:8080/fetch?url=http://%s:8080/", p.Status.PodIP, q.Status.PodIP)
			if err := getJSON(url, &other); err != nil || other["pod"] != q.Name {
				t.Errorf("pod %s cannot reach pod %s: %v %v", p.Name, q.Name, err, other)
			}
		}
		var api map[string]string
		if err := getJSON(fmt.Sprintf("http://%s:8080/api-check", p.Status.PodIP), &api); err != nil {
			t.Errorf("pod %s cannot use the API with its in-cluster config: %v", p.Name, err)
		} else if api["gitVersion"] != env(t, "KSHARD_EXPECT_K8S_VERSION") {
			t.Errorf("pod %s got version %v", p.Name, api)
		}
	}
	// kubectl logs works: the API server proxies to the kubelet's API.
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pods[0].Name, &v1.PodLogOptions{Container: "app", TailLines: ptrInt64(5)}).DoRaw(ctx(t))
	if err != nil || !strings.Contains(string(raw), "START") {
		t.Errorf("pod logs through the API: %q %v", raw, err)
	}
	var e map[string]string
	if err := getJSON(fmt.Sprintf("http://%s:8080/env", pods[0].Status.PodIP), &e); err != nil {
		t.Fatal(err)
	}
	if e["KUBERNETES_SERVICE_HOST"] == "" || e["KUBERNETES_SERVICE_PORT"] == "" {
		t.Errorf("KUBERNETES_SERVICE_HOST/PORT missing: %v", e)
	}
	checkNoWayOut(t, pods[0].Status.PodIP)

	waitFor(t, 30*time.Second, "3 ready endpoints of Service web", func() (bool, string) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return false, err.Error()
		}
		got := map[string]bool{}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					for _, a := range ep.Addresses {
						got[a] = true
					}
				}
			}
		}
		for ip := range ips {
			if !got[ip] {
				return false, fmt.Sprintf("ready endpoints %v, pods %v", got, ips)
			}
		}
		return len(got) == 3, fmt.Sprintf("ready endpoints %v", got)
	})

	// Rolling update: a new template (new image tag, same executable).
	old := map[string]bool{}
	for _, p := range pods {
		old[p.Name] = true
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template = appDeployment("web", 3, "1.1.0").Spec.Template
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx(t), d, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update deployment: %v", err)
	}
	waitFor(t, 120*time.Second, "the rollout to finish", func() (bool, string) {
		all := podsOf(t, cs, ns, "app=web", true)
		if len(all) != 3 {
			return false, describePods(all)
		}
		for _, p := range all {
			if old[p.Name] || !podstate.Ready(&p) || p.Labels["app.kubernetes.io/version"] != "1.1.0" {
				return false, describePods(all)
			}
		}
		d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.UpdatedReplicas == 3 && d.Status.ReadyReplicas == 3 && d.Status.Replicas == 3,
			fmt.Sprintf("deployment status %+v", d.Status)
	})
	for name := range old {
		words, _ := logEvents(t, ns, name, "app", "EXIT")
		pre, term := indexOf(words, "PRESTOP"), indexOf(words, "SIGTERM")
		if pre < 0 || term < 0 || pre > term || indexOf(words, "EXIT") < term {
			t.Errorf("old pod %s: want PRESTOP, then SIGTERM, then EXIT in its log, got %v", name, words)
		}
	}
	for _, p := range podsOf(t, cs, ns, "app=web", false) {
		var who map[string]string
		if err := getJSON(fmt.Sprintf("http://%s:8080/", p.Status.PodIP), &who); err != nil || who["version"] != "1.1.0" {
			t.Errorf("new pod %s: %v %v", p.Name, who, err)
		}
	}

	// A deleted pod is replaced.
	victim := podsOf(t, cs, ns, "app=web", false)[0]
	if err := cs.CoreV1().Pods(ns).Delete(ctx(t), victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	now := waitReadyPods(t, cs, ns, "app=web", 3, true, 60*time.Second)
	for _, p := range now {
		if p.Name == victim.Name {
			t.Fatalf("deleted pod %s is still there", victim.Name)
		}
	}
	if words, _ := logEvents(t, ns, victim.Name, "app", "EXIT"); indexOf(words, "PRESTOP") < 0 || indexOf(words, "SIGTERM") < 0 {
		t.Errorf("deleted pod %s: want PRESTOP and SIGTERM in its log, got %v", victim.Name, words)
	}
}

// fault.sh crash SIGKILLs a pod's processes without warning; the kubelet restarts the container.
func TestKilledContainerIsRestarted(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx(t), appDeployment("victim", 1, "1.0.0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := waitReadyPods(t, cs, ns, "app=victim", 1, true, 60*time.Second)[0]
	runScript(t, "fault.sh", "crash", ns, pod.Name)
	waitFor(t, 60*time.Second, "the killed container to be restarted and Ready", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status.ContainerStatuses
		if len(st) != 1 || st[0].RestartCount != 1 || !podstate.Ready(p) {
			return false, describePods([]v1.Pod{*p})
		}
		last := st[0].LastTerminationState.Terminated
		return last != nil && last.ExitCode == 137, fmt.Sprintf("last termination %+v", last)
	})
	if words, _ := logEvents(t, ns, pod.Name, "app", "START"); indexOf(words, "PRESTOP") >= 0 || indexOf(words, "SIGTERM") >= 0 {
		t.Errorf("a SIGKILLed container must get no preStop or SIGTERM, log has %v", words)
	}
}

// A container that ignores SIGTERM past the grace period is SIGKILLed, and the pod is then gone.
func TestGracePeriodEndsWithSIGKILL(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	c := appContainer("app", appImage, 8080)
	c.Env = append(c.Env, v1.EnvVar{Name: "TERM_DELAY", Value: "60s"})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stubborn", Labels: map[string]string{"app": "stubborn"}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptrInt64(2), Containers: []v1.Container{c}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyPods(t, cs, ns, "app=stubborn", 1, true, 60*time.Second)
	start := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx(t), "stubborn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the pod to be gone after its 2 s grace period", func() (bool, string) {
		all := podsOf(t, cs, ns, "app=stubborn", true)
		return len(all) == 0, describePods(all)
	})
	words, _ := logEvents(t, ns, "stubborn", "app", "SIGTERM")
	if indexOf(words, "PRESTOP") < 0 || indexOf(words, "SIGTERM") < 0 || indexOf(words, "EXIT") >= 0 {
		t.Errorf("want PRESTOP and SIGTERM but no EXIT (killed at the end of the grace period), got %v", words)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("the pod went after %s, before its grace period ended", took)
	}
}

// Volumes (secret, configMap, downwardAPI, projected token with an audience, emptyDir, subPath)
// appear at their mountPaths; downward-API env resolves labels and annotations.
func TestVolumesEnvAndTokens(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx(t), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"},
		Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx(t), &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"config.yaml": "shards: 300\n", "other": "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := appContainer("app", appImage, 8080)
	c.Env = append(c.Env,
		v1.EnvVar{Name: "FROM_ANNOTATION", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations['e2e.kshard.io/note']"}}},
		v1.EnvVar{Name: "COMPOSED", Value: "$(POD_NAMESPACE)/$(POD_NAME)"},
		v1.EnvVar{Name: "FROM_SECRET", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "tls"}, Key: "tls.key"}}},
	)
	c.VolumeMounts = []v1.VolumeMount{
		{Name: "tls", MountPath: "/etc/kshard-e2e/tls", ReadOnly: true},
		{Name: "cfg", MountPath: "/etc/kshard-e2e/config.yaml", SubPath: "config.yaml"},
		{Name: "info", MountPath: "/etc/kshard-e2e/info"},
		{Name: "kshard-token", MountPath: "/var/run/secrets/kshard.io"},
		{Name: "scratch", MountPath: "/tmp/kshard-e2e-scratch"},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "volumes", Labels: map[string]string{"app": "volumes", "app.kubernetes.io/version": "2.0.0"},
			Annotations: map[string]string{"e2e.kshard.io/note": "hello"}},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: ptrInt64(5),
			Containers:                    []v1.Container{c},
			Volumes: []v1.Volume{
				{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls"}}},
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				}}}},
				{Name: "kshard-token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Audience: "kshard", ExpirationSeconds: ptrInt64(600), Path: "token"}},
				}}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitReadyPods(t, cs, ns, "app=volumes", 1, true, 60*time.Second)[0]
	base := fmt.Sprintf("http://%s:8080", p.Status.PodIP)
	file := func(path string) string {
		resp, err := httpClient.Get(base + "/file?path=" + path)
		if err != nil {
			t.Fatalf("read %s in the pod: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("read %s in the pod: %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	if got := file("/etc/kshard-e2e/tls/tls.crt"); got != "CERT" {
		t.Errorf("secret volume: tls.crt = %q", got)
	}
	if got := file("/etc/kshard-e2e/config.yaml"); got != "shards: 300\n" {
		t.Errorf("configMap subPath: %q", got)
	}
	if got := file("/etc/kshard-e2e/info/labels"); !strings.Contains(got, `app.kubernetes.io/version="2.0.0"`) {
		t.Errorf("downwardAPI labels: %q", got)
	}
	if got := file("/etc/kshard-e2e/info/name"); got != "volumes" {
		t.Errorf("downwardAPI name: %q", got)
	}
	saToken := file("/var/run/secrets/kubernetes.io/serviceaccount/token")
	if got := file("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); got != ns {
		t.Errorf("default service-account volume: namespace = %q", got)
	}
	if got := file("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"); !strings.Contains(got, "BEGIN CERTIFICATE") {
		t.Errorf("default service-account volume: ca.crt = %q", got)
	}
	kshardToken := file("/var/run/secrets/kshard.io/token")
	var e map[string]string
	if err := getJSON(base+"/env", &e); err != nil {
		t.Fatal(err)
	}
	if e["APP_VERSION"] != "2.0.0" || e["FROM_ANNOTATION"] != "hello" || e["COMPOSED"] != ns+"/volumes" ||
		e["FROM_SECRET"] != "KEY" || e["POD_IP"] != p.Status.PodIP {
		t.Errorf("env: %v", e)
	}

	// Both tokens are valid TokenRequest tokens bound to the pod, with their audiences.
	review := func(tok, audience string) *authnv1.TokenReview {
		tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok}}
		if audience != "" {
			tr.Spec.Audiences = []string{audience}
		}
		res, err := cs.AuthenticationV1().TokenReviews().Create(ctx(t), tr, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenReview: %v", err)
		}
		return res
	}
	wantUser := "system:serviceaccount:" + ns + ":default"
	if r := review(saToken, ""); !r.Status.Authenticated || r.Status.User.Username != wantUser {
		t.Errorf("service-account token: %+v", r.Status)
	} else if pods := r.Status.User.Extra["authentication.kubernetes.io/pod-name"]; len(pods) != 1 || pods[0] != "volumes" {
		t.Errorf("service-account token not bound to the pod: %v", r.Status.User.Extra)
	}
	if r := review(kshardToken, "kshard"); !r.Status.Authenticated || r.Status.User.Username != wantUser ||
		len(r.Status.Audiences) != 1 || r.Status.Audiences[0] != "kshard" {
		t.Errorf("kshard-audience token: %+v", r.Status)
	}
	if r := review(kshardToken, ""); r.Status.Authenticated {
		t.Errorf("a kshard-audience token must not authenticate against the API server's audience")
	}

	// Files follow their sources (the kubelet's periodic resync).
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx(t), "cfg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["other"] = "y"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx(t), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx(t), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"},
		Data: map[string][]byte{"tls.crt": []byte("CERT2"), "tls.key": []byte("KEY2")}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the secret volume to show the updated secret", func() (bool, string) {
		got := file("/etc/kshard-e2e/tls/tls.crt")
		return got == "CERT2", got
	})
}

// A native sidecar (init container with restartPolicy Always) starts, and is started, before the
// app container, and stops after it.
func TestNativeSidecarStartsFirstAndStopsLast(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	sidecar := appContainer("sidecar", appImage, 8081)
	sidecar.RestartPolicy = ptrRestart(v1.ContainerRestartPolicyAlways)
	sidecar.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8081)}}, PeriodSeconds: 1, FailureThreshold: 30}
	sidecar.Lifecycle = nil
	sidecar.Ports[0].Name = "sidecar-http"
	sidecar.ReadinessProbe.HTTPGet.Port = intstr.FromString("sidecar-http")
	sidecar.LivenessProbe.HTTPGet.Port = intstr.FromString("sidecar-http")
	app := appContainer("app", appImage, 8080)
	app.Env = append(app.Env, v1.EnvVar{Name: "PRESTOP_DELAY", Value: "1s"})
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "with-sidecar", Labels: map[string]string{"app": "with-sidecar"}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: ptrInt64(20), InitContainers: []v1.Container{sidecar},
			Containers: []v1.Container{app}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitReadyPods(t, cs, ns, "app=with-sidecar", 1, true, 60*time.Second)[0]
	sc, ac := p.Status.InitContainerStatuses, p.Status.ContainerStatuses
	if len(sc) != 1 || len(ac) != 1 || sc[0].State.Running == nil || ac[0].State.Running == nil {
		t.Fatalf("statuses: %s", describePods([]v1.Pod{p}))
	}
	_, sideStamps := logEvents(t, ns, p.Name, "sidecar", "START")
	_, appStamps := logEvents(t, ns, p.Name, "app", "START")
	if len(sideStamps) == 0 || len(appStamps) == 0 || sideStamps[0] >= appStamps[0] {
		t.Errorf("the sidecar must start before the app: sidecar %v, app %v", sideStamps, appStamps)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx(t), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the pod to be gone", func() (bool, string) {
		all := podsOf(t, cs, ns, "app=with-sidecar", true)
		return len(all) == 0, describePods(all)
	})
	sideWords, sideTimes := logEvents(t, ns, p.Name, "sidecar", "SIGTERM")
	appWords, appTimes := logEvents(t, ns, p.Name, "app", "EXIT")
	appExit, sideTerm := indexOf(appWords, "EXIT"), indexOf(sideWords, "SIGTERM")
	if appExit < 0 || sideTerm < 0 || appTimes[appExit] > sideTimes[sideTerm] {
		t.Errorf("the sidecar must get SIGTERM after the app exited: app %v %v, sidecar %v %v", appWords, appTimes, sideWords, sideTimes)
	}
}

// An image the node does not have (and cannot pull: no registry is reachable) leaves the
// container waiting with the kubelet's reason, naming the image.
func TestUnknownImageWaitsWithReason(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	const image = "example.invalid/nothing:1"
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unknown-image"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the container to wait with ErrImagePull or ImagePullBackOff", func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "unknown-image", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status.ContainerStatuses
		ok := len(st) == 1 && st[0].State.Waiting != nil &&
			(st[0].State.Waiting.Reason == "ErrImagePull" || st[0].State.Waiting.Reason == "ImagePullBackOff") &&
			strings.Contains(st[0].State.Waiting.Message, image) && p.Status.Phase == v1.PodPending
		return ok, describePods([]v1.Pod{*p})
	})
}

// The API server serves OIDC discovery for its service-account issuer.
func TestServiceAccountIssuerDiscovery(t *testing.T) {
	cs, _ := clients(t)
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx(t))
	if err != nil {
		t.Fatalf("openid-configuration: %v", err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Issuer == "" || !strings.HasSuffix(doc.JWKSURI, "/openid/v1/jwks") {
		t.Fatalf("openid-configuration: %s (%v)", raw, err)
	}
	raw, err = cs.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx(t))
	if err != nil || !strings.Contains(string(raw), `"keys"`) {
		t.Fatalf("jwks: %s (%v)", raw, err)
	}
}

// The API server can be stopped and started alone (a later e2e scenario stops it for 30 s):
// the node stays Ready and running pods keep running and serving.
func TestAPIServerStopAndStart(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx(t), appDeployment("steady", 1, "1.0.0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := waitReadyPods(t, cs, ns, "app=steady", 1, true, 60*time.Second)[0]
	runScript(t, "apiserver.sh", "stop")
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Fatal("the API server still answers after apiserver.sh stop")
	}
	if err := getJSON(fmt.Sprintf("http://%s:8080/", pod.Status.PodIP), nil); err != nil {
		t.Errorf("pod stopped serving while the API server was down: %v", err)
	}
	runScript(t, "apiserver.sh", "start")
	p := waitReadyPods(t, cs, ns, "app=steady", 1, true, 60*time.Second)[0]
	if p.UID != pod.UID || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod was disturbed by the API server restart: %s", describePods([]v1.Pod{p}))
	}
	TestNodeIsReady(t)
}

// checkNoWayOut verifies that pods reach nothing outside the pod network: a pod's IPv4 routes
// are the pod range and the kubernetes Service's address through the node (which the node
// rewrites to the API server), so a connection to any other address fails at once with "network
// is unreachable" and no packet leaves; and the bridge does not forward.
func checkNoWayOut(t *testing.T, podIP string) {
	t.Helper()
	// 192.0.2.1 is TEST-NET-1 (documentation only); the connect fails locally, without a packet.
	resp, err := httpClient.Get(fmt.Sprintf("http://%s:8080/fetch?url=http://192.0.2.1:80/", podIP))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "network is unreachable") {
		t.Errorf("a pod must have no route out of the pod network: %d %s", resp.StatusCode, body)
	}
	prefix, bridge := env(t, "KSHARD_CLUSTER_NETNS_PREFIX"), env(t, "KSHARD_CLUSTER_BRIDGE")
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], prefix) {
			continue
		}
		routes, err := exec.Command("ip", "-n", fields[0], "-4", "route", "show").Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(routes)), "\n")
		sort.Strings(lines)
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "10.244.0.0/16 dev eth0") ||
			strings.TrimSpace(lines[1]) != "10.96.0.1 via 10.244.0.1 dev eth0" {
			t.Errorf("namespace %s must route the pod range and 10.96.0.1 only, has %q", fields[0], routes)
		}
		checked++
	}
	if checked == 0 {
		t.Errorf("no pod network namespace found with prefix %q", prefix)
	}
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + bridge + "/forwarding")
	if err != nil || strings.TrimSpace(string(fwd)) != "0" {
		t.Errorf("bridge %s must not forward: %q %v", bridge, fwd, err)
	}
}

func ptrInt64(v int64) *int64 { return &v }
func ptrRestart(v v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy {
	return &v
}
