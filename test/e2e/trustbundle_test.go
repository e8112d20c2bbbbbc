package e2e

import (
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// caCert is a new self-signed CA certificate, as PEM.
func caCert(t *testing.T, name string) string {
	t.Helper()
	certFile, _ := writeServerCert(t, t.TempDir(), name)
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pemSet is the certificates of a PEM text, sorted.
func pemSet(text string) []string {
	var out []string
	rest := []byte(text)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out = append(out, string(pem.EncodeToMemory(b)))
	}
	slices.Sort(out)
	return out
}

// indent prefixes every line of s, for a YAML block scalar.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+prefix)
}

// TestClusterTrustBundles: ClusterTrustBundles are served (kubectl get
// shows their signer), and a projected volume holds the certificates of
// one by name and of a signer's bundles whose labels match, each once; a
// pod whose required bundle does not exist does not start, and its
// FailedMount event says why, as the kubelet's.
func TestClusterTrustBundles(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	a, b, x := caCert(t, "a.example.com"), caCert(t, "b.example.com"), caCert(t, "x.example.com")
	bundle := func(name, signer, alive string, pems ...string) string {
		meta := fmt.Sprintf("metadata: {name: %q}\nspec:\n", name)
		if signer != "" {
			meta = fmt.Sprintf("metadata: {name: %q, labels: {alive: %q}}\nspec:\n  signerName: %s\n", name, alive, signer)
		}
		return "apiVersion: certificates.k8s.io/v1\nkind: ClusterTrustBundle\n" + meta +
			"  trustBundle: |\n" + indent(strings.Join(pems, ""), "    ") + "\n---\n"
	}
	c.withStdin(bundle("plain", "", "", a, b)+
		bundle("example.com:demo:1", "example.com/demo", "true", a)+
		bundle("example.com:demo:2", "example.com/demo", "true", b, a)+
		bundle("example.com:demo:3", "example.com/demo", "false", x), "apply", "-f", "-")
	if got := strings.Join(strings.Fields(c.must("get", "clustertrustbundles")), " "); !strings.HasPrefix(got, "NAME SIGNERNAME example.com:demo:1 example.com/demo") {
		t.Errorf("kubectl get clustertrustbundles: %s", got)
	}

	c.pod("anchors", "busybox", `    command: [sh, -c, 'cat /ctb/by-name.pem; echo SEPARATOR; cat /ctb/alive.pem; sleep 3600']
    volumeMounts: [{name: ctb, mountPath: /ctb}]
  volumes:
  - name: ctb
    projected:
      sources:
      - clusterTrustBundle: {name: plain, path: by-name.pem}
      - clusterTrustBundle: {signerName: example.com/demo, labelSelector: {matchLabels: {alive: "true"}}, path: alive.pem}
`)
	c.waitReady("anchors", "True", 30*time.Second)
	c.waitLog("anchors", "main", "SEPARATOR", 10*time.Second)
	byName, alive, _ := strings.Cut(c.must("logs", "anchors"), "SEPARATOR")
	if want := pemSet(a + b); !slices.Equal(pemSet(byName), want) || !slices.Equal(pemSet(alive), want) {
		t.Errorf("the projected anchors: by name\n%s\nalive\n%s\nwant a and b each once", byName, alive)
	}

	c.pod("unmounted", "busybox", `    command: [sleep, "3600"]
    volumeMounts: [{name: ctb, mountPath: /ctb}]
  volumes:
  - name: ctb
    projected:
      sources:
      - clusterTrustBundle: {name: does-not-exist, path: bundle.pem}
`)
	c.waitPodEvent("unmounted", "FailedMount", `MountVolume.SetUp failed for volume "ctb" : while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "does-not-exist" not found`)
	if got := c.jsonpath("pod", "unmounted", "{.status.phase}"); got != "Pending" {
		t.Errorf("a pod whose bundle does not exist is %s, want Pending", got)
	}
}
