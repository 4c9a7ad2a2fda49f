package securitytest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// servedCertificate is the leaf certificate a TLS server at `address` presents (nil: none).
func servedCertificate(address string) []byte {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", address,
		// Not verified: the test compares the certificate itself.
		&tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil
	}
	return certs[0].Raw
}

// selfSigned is a fresh serving certificate and key, as PEM.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kshard-webhook.kshard-system.svc"},
		DNSNames:     []string{"kshard-webhook.kshard-system.svc"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), der
}

// Issue 29, low: the webhook read its certificate only at start; a certificate renewed by
// cert-manager (a new Secret, which the kubelet writes into the running pods) was served only
// after a restart, and not at all once the old one expired.
func TestTheWebhookServesARenewedCertificateWithoutARestart(t *testing.T) {
	c := clients(t)
	const secretName = "kshard-webhook-tls"
	secrets := c.Clientset.CoreV1().Secrets(kshardNamespace)
	original, err := secrets.Get(bg(), secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := c.Clientset.CoreV1().Pods(kshardNamespace).List(bg(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil || len(ops.Items) == 0 {
		t.Fatalf("the operator pods: %v", err)
	}
	restarts := map[string]int32{}
	for _, p := range ops.Items {
		for _, s := range p.Status.ContainerStatuses {
			restarts[p.Name] += s.RestartCount
		}
	}
	serving := func(der []byte) func() (bool, string) {
		return func() (bool, string) {
			for _, p := range ops.Items {
				if !bytes.Equal(servedCertificate(p.Status.PodIP+":9443"), der) {
					return false, p.Name + " serves another certificate"
				}
			}
			return true, ""
		}
	}
	oldBlock, _ := pem.Decode(original.Data["tls.crt"])
	if oldBlock == nil {
		t.Fatal("the webhook Secret holds no certificate")
	}
	waitFor(t, 30*time.Second, "every replica serves the installed certificate", serving(oldBlock.Bytes))

	certPEM, keyPEM, der := selfSigned(t)
	renewed := original.DeepCopy()
	renewed.Data["tls.crt"], renewed.Data["tls.key"] = certPEM, keyPEM
	if _, err := secrets.Update(bg(), renewed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		current, err := secrets.Get(bg(), secretName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("reading the webhook Secret to restore it: %v", err)
			return
		}
		current.Data = original.Data
		if _, err := secrets.Update(bg(), current, metav1.UpdateOptions{}); err != nil {
			t.Errorf("restoring the webhook Secret: %v", err)
		}
	}
	t.Cleanup(restore)
	// The kubelet rewrites Secret volumes on its pod sync (every 30 s here, e2e/cluster/node.sh);
	// the operator looks every 10 s.
	waitFor(t, 90*time.Second, "every replica serves the renewed certificate", serving(der))
	restore()
	waitFor(t, 90*time.Second, "every replica serves the original certificate again", serving(oldBlock.Bytes))
	after, err := c.Clientset.CoreV1().Pods(kshardNamespace).List(bg(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range after.Items {
		var n int32
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
		if n != restarts[p.Name] {
			t.Errorf("%s restarted (%d -> %d) to serve the new certificate", p.Name, restarts[p.Name], n)
		}
	}
	t.Log("both certificates were served in turn, without a restart")
}
