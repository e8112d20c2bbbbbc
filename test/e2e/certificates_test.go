package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	svccluster "github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/pki"
)

// csrKey is a new key and the PEM certificate request of subject cn, o
// made with it.
func csrKey(t *testing.T, cn string, o ...string) (keyPEM, reqPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: o}}, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// csrManifest is a CertificateSigningRequest of req for signer.
func csrManifest(name, signer string, req []byte, usages ...string) string {
	return fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: %s
  expirationSeconds: 86400
  usages: [%s]
`, name, base64.StdEncoding.EncodeToString(req), signer, strings.Join(usages, ", "))
}

// issued waits for the request's certificate and returns it.
func (c *cluster) issued(as []string, name string) []byte {
	c.t.Helper()
	var cert []byte
	eventually(c.t, 30*time.Second, func() string {
		out := c.must(append(as, "get", "csr", name, "-o", "jsonpath={.status.certificate}")...)
		if out == "" {
			return "no certificate yet: " + c.must("get", "csr", name, "-o", "yaml")
		}
		var err error
		if cert, err = base64.StdEncoding.DecodeString(out); err != nil {
			return err.Error()
		}
		return ""
	})
	return cert
}

// kubeconfigOf writes a kubeconfig of the client certificate and key.
func (c *cluster) kubeconfigOf(name string, cert, key []byte) string {
	c.t.Helper()
	ca, err := pki.LoadOrCreateCA(filepath.Join(c.dataDir, "pki"))
	if err != nil {
		c.t.Fatal(err)
	}
	path := filepath.Join(c.t.TempDir(), name+".kubeconfig")
	if err := svccluster.WriteKubeconfig(path, "https://"+c.apiAddr, ca.CertPEM, pki.Pair{CertPEM: cert, KeyPEM: key}); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// TestCertificateSigningRequests: a user's request is Pending until
// approved, then issued by the cluster CA for the time it asks, and the
// certificate is the user's identity; approving needs the approve verb on
// the signer; a denied request stays unissued and a request its signer's
// rules refuse fails; a kubelet client request of a user allowed
// certificatesigningrequests/nodeclient is approved and issued by the
// controllers alone, as TLS bootstrapping needs.
func TestCertificateSigningRequests(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	if out := c.must("explain", "csr.spec.signerName"); !strings.Contains(out, "CertificateSigningRequest") {
		t.Errorf("explain:\n%s", out)
	}

	key, req := csrKey(t, "jane", "dev")
	if out := c.withStdin(csrManifest("jane", "kubernetes.io/kube-apiserver-client", req, "client auth"), "create", "-f", "-"); !strings.Contains(out, "certificatesigningrequest.certificates.k8s.io/jane created") {
		t.Fatalf("create:\n%s", out)
	}
	header, row := tableRow(t, c.must("get", "csr"), "jane")
	if got, want := strings.Join(header, " "), "NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION"; got != want {
		t.Errorf("columns %q, want %q", got, want)
	}
	if got, want := strings.Join(row[2:], " "), "kubernetes.io/kube-apiserver-client svcnet-admin 24h Pending"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}

	// Allowed to approve requests, but not of this signer.
	bob := []string{"--kubeconfig", c.userKubeconfig("bob")}
	c.withStdin(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: csr-approver
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [get, list]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/approval]
  verbs: [update]
`, "apply", "-f", "-")
	c.must("create", "clusterrolebinding", "bob-csr", "--clusterrole", "csr-approver", "--user", "bob")
	eventually(t, 10*time.Second, func() string {
		out, _ := c.kubectl("", append(bob, "certificate", "approve", "jane")...)
		if !strings.Contains(out, `user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`) {
			return "approve as bob: " + out
		}
		return ""
	})

	if out := c.must("certificate", "approve", "jane"); !strings.Contains(out, "certificatesigningrequest.certificates.k8s.io/jane approved") {
		t.Fatalf("approve:\n%s", out)
	}
	certPEM := c.issued(nil, "jane")
	_, row = tableRow(t, c.must("get", "csr", "jane"), "jane")
	if row[len(row)-1] != "Approved,Issued" {
		t.Errorf("condition %q, want Approved,Issued", row[len(row)-1])
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("certificate is no PEM:\n%s", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	// Asked for a day, it lives a day from 5 minutes back.
	if life, ago := cert.NotAfter.Sub(cert.NotBefore), time.Since(cert.NotBefore); life != 24*time.Hour || ago < 5*time.Minute || ago > 6*time.Minute {
		t.Errorf("certificate from %s (%s ago) lives %s, want a day from 5 minutes ago", cert.NotBefore, ago, life)
	}
	// Issued by the controller's own identity, as upstream's.
	if sa := c.must("get", "serviceaccount", "certificate-controller", "-n", "kube-system", "-o", "name"); strings.TrimSpace(sa) != "serviceaccount/certificate-controller" {
		t.Errorf("the CSR controllers' ServiceAccount: %q", sa)
	}
	jane := []string{"--kubeconfig", c.kubeconfigOf("jane", certPEM, key)}
	if out := c.must(append(jane, "auth", "whoami")...); !strings.Contains(out, "jane") || !strings.Contains(out, "[dev system:authenticated]") {
		t.Errorf("whoami with the issued certificate:\n%s", out)
	}
	// kubectl refuses to deny an approved request; the API server does too.
	var csr capi.CertificateSigningRequest
	if err := json.Unmarshal([]byte(c.must("get", "csr", "jane", "-o", "json")), &csr); err != nil {
		t.Fatal(err)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, capi.CertificateSigningRequestCondition{Type: capi.CertificateDenied, Status: corev1.ConditionTrue})
	body, err := json.Marshal(&csr)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.kubectl(string(body), "replace", "--raw", "/apis/certificates.k8s.io/v1/certificatesigningrequests/jane/approval", "-f", "-"); err == nil ||
		!strings.Contains(out, "Approved and Denied conditions are mutually exclusive") {
		t.Errorf("deny an approved request: %v\n%s", err, out)
	}

	// Denied: never issued.
	_, req = csrKey(t, "joe")
	c.withStdin(csrManifest("joe", "kubernetes.io/kube-apiserver-client", req, "client auth"), "create", "-f", "-")
	if out := c.must("certificate", "deny", "joe"); !strings.Contains(out, "certificatesigningrequest.certificates.k8s.io/joe denied") {
		t.Fatalf("deny:\n%s", out)
	}
	if _, row := tableRow(t, c.must("get", "csr", "joe"), "joe"); row[len(row)-1] != "Denied" {
		t.Errorf("condition %q, want Denied", row[len(row)-1])
	}
	// Not for system:masters through the API server client signer.
	_, req = csrKey(t, "root", "system:masters")
	if out, err := c.kubectl(csrManifest("root", "kubernetes.io/kube-apiserver-client", req, "client auth"), "create", "-f", "-"); err == nil ||
		!strings.Contains(out, "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed") {
		t.Errorf("create a request for system:masters: %v\n%s", err, out)
	}
	// A kubelet client request not for a node fails at its signer.
	_, req = csrKey(t, "system:node:x", "dev")
	c.withStdin(csrManifest("notnode", "kubernetes.io/kube-apiserver-client-kubelet", req, "digital signature", "client auth"), "create", "-f", "-")
	c.must("certificate", "approve", "notnode")
	eventually(t, 30*time.Second, func() string {
		_, row := tableRow(t, c.must("get", "csr", "notnode"), "notnode")
		if row[len(row)-1] != "Approved,Failed" {
			return "condition " + row[len(row)-1]
		}
		return ""
	})
	if out := c.must("get", "csr", "notnode", "-o", "jsonpath={.status.conditions[1].reason}: {.status.conditions[1].message}"); out != "SignerValidationFailure: subject organization is not system:nodes" {
		t.Errorf("failure: %q", out)
	}

	// A bootstrapping node: may create requests and have node client
	// certificates approved.
	boot := []string{"--kubeconfig", c.userKubeconfig("system:bootstrap:abcdef", "system:bootstrappers")}
	c.must("create", "clusterrolebinding", "bootstrap-csr", "--clusterrole", "system:node-bootstrapper", "--group", "system:bootstrappers")
	c.must("create", "clusterrolebinding", "bootstrap-approve", "--clusterrole", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", "--group", "system:bootstrappers")
	key, req = csrKey(t, "system:node:node-a", "system:nodes")
	eventually(t, 10*time.Second, func() string {
		out, err := c.kubectl(csrManifest("node-csr-a", "kubernetes.io/kube-apiserver-client-kubelet", req, "digital signature", "client auth"), append(boot, "create", "-f", "-")...)
		if err != nil {
			return "create as the bootstrapper: " + out
		}
		return ""
	})
	certPEM = c.issued(boot, "node-csr-a")
	if out := c.must("get", "csr", "node-csr-a", "-o", "jsonpath={.spec.username} {.status.conditions[0].reason}: {.status.conditions[0].message}"); out != "system:bootstrap:abcdef AutoApproved: Auto approving kubelet client certificate after SubjectAccessReview." {
		t.Errorf("approval: %q", out)
	}
	node := []string{"--kubeconfig", c.kubeconfigOf("node-a", certPEM, key)}
	if out := c.must(append(node, "auth", "whoami")...); !strings.Contains(out, "system:node:node-a") || !strings.Contains(out, "[system:nodes system:authenticated]") {
		t.Errorf("whoami with the node's certificate:\n%s", out)
	}
}
