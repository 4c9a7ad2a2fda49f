package clustertest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// webhookCerts makes a CA and a serving certificate for <svc>.<ns>.svc.
func webhookCerts(t *testing.T, svc, ns string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("%s.%s.svc", svc, ns)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		DNSNames:  []string{host, host + ".cluster.local"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// The API server calls a mutating webhook served by a pod through its Service (resolved to the
// pod's IP by aggregator routing: no DNS, no kube-proxy), with a CEL matchCondition on an
// annotation and a TLS certificate from a Secret volume: what kshard's injector needs.
func TestMutatingWebhookServedByAPod(t *testing.T) {
	cs, _ := clients(t)
	ns := testNamespace(t, cs)
	caPEM, certPEM, keyPEM := webhookCerts(t, "e2e-webhook", ns)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx(t), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook-tls"},
		Type: v1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := appDeployment("e2e-webhook", 2, "1.0.0")
	c := &dep.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, v1.EnvVar{Name: "TLS_DIR", Value: "/etc/webhook/tls"}, v1.EnvVar{Name: "TLS_PORT", Value: "9443"})
	c.Ports = append(c.Ports, v1.ContainerPort{Name: "webhook", ContainerPort: 9443})
	c.VolumeMounts = []v1.VolumeMount{{Name: "tls", MountPath: "/etc/webhook/tls", ReadOnly: true}}
	dep.Spec.Template.Spec.Volumes = []v1.Volume{{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "webhook-tls"}}}}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx(t), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx(t), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-webhook"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "e2e-webhook"},
			Ports: []v1.ServicePort{{Port: 443, TargetPort: intstr.FromString("webhook")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyPods(t, cs, ns, "app=e2e-webhook", 2, true, 60*time.Second)

	name := ns + "-inject"
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name: "inject.e2e.kshard.io",
			ClientConfig: admissionregv1.WebhookClientConfig{CABundle: caPEM,
				Service: &admissionregv1.ServiceReference{Namespace: ns, Name: "e2e-webhook", Path: ptr.To("/mutate"), Port: ptr.To(int32(443))}},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			MatchConditions:         []admissionregv1.MatchCondition{{Name: "annotated", Expression: `has(object.metadata.annotations) && 'e2e.kshard.io/inject' in object.metadata.annotations && object.metadata.annotations['e2e.kshard.io/inject'] == 'true'`}},
			FailurePolicy:           ptr.To(admissionregv1.Fail),
			SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(10)),
		}},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx(t), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	plain := func(podName string, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Annotations: annotations},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: appImage}}}}
	}
	// The webhook configuration takes effect asynchronously: retry until the pod comes back mutated.
	var mutated *v1.Pod
	n := 0
	waitFor(t, 30*time.Second, "an annotated pod to be mutated by the webhook", func() (bool, string) {
		n++
		p, err := cs.CoreV1().Pods(ns).Create(context.Background(), plain(fmt.Sprintf("annotated-%d", n),
			map[string]string{"e2e.kshard.io/inject": "true"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		mutated = p
		return p.Labels["e2e.kshard.io/mutated-by"] != "", fmt.Sprintf("labels %v", p.Labels)
	})
	if by := mutated.Labels["e2e.kshard.io/mutated-by"]; len(podsOf(t, cs, ns, "app=e2e-webhook", false)) != 2 || by == "" {
		t.Errorf("mutated-by %q", by)
	}
	p, err := cs.CoreV1().Pods(ns).Create(ctx(t), plain("not-annotated", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Labels["e2e.kshard.io/mutated-by"]; ok {
		t.Errorf("a pod without the annotation must not reach the webhook (matchConditions): %v", p.Labels)
	}
}
