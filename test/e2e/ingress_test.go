package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ingressManifest is the test's apps: app and api (http-echo answering
// their names) and netexec (agnhost, for its /header and /shell), behind
// one Ingress on web.example.test with TLS from the Secret web-tls.
const ingressManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - {name: echo, image: hashicorp/http-echo, args: ["-text=app"], ports: [{name: web, containerPort: 5678}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: echo, image: hashicorp/http-echo, args: ["-text=api"], ports: [{name: web, containerPort: 5678}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: netexec}
spec:
  selector: {matchLabels: {app: netexec}}
  template:
    metadata: {labels: {app: netexec}}
    spec:
      containers:
      - {name: netexec, image: registry.k8s.io/e2e-test-images/agnhost:2.53, args: [netexec, --http-port=8080, --udp-port=-1], ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: app}
spec:
  selector: {app: app}
  ports: [{name: http, port: 80, targetPort: web}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  selector: {app: api}
  ports: [{name: http, port: 8000, targetPort: 5678}]
---
apiVersion: v1
kind: Service
metadata: {name: netexec}
spec:
  selector: {app: netexec}
  ports: [{port: 80, targetPort: 8080}]
`

// webIngress routes /app and /api (and, before the edit, netexec's
// paths) of web.example.test.
func webIngress(appService string, withNetexec bool) string {
	netexec := ""
	if withNetexec {
		netexec = `
      - {path: /header, pathType: Exact, backend: {service: {name: netexec, port: {number: 80}}}}
      - {path: /shell, pathType: Prefix, backend: {service: {name: netexec, port: {number: 80}}}}`
	}
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: svcnet
  tls: [{hosts: [web.example.test], secretName: web-tls}]
  rules:
  - host: web.example.test
    http:
      paths:
      - {path: /app, pathType: Prefix, backend: {service: {name: %s, port: {name: http}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 8000}}}}%s
`, appService, netexec)
}

// ingressLBIP is the one address of the pool ingressAddress makes.
const ingressLBIP = "192.0.2.80"

// ingressAddress is where the client reaches the Ingress controller on
// ports 80 and 443: a pool of one address (MetalLB's IPAddressPool, as a
// user applies it) gives the controller's LoadBalancer Service its
// address, and the client routes it to the node, whose proxy captures it
// as any load balancer IP (answering ARP for pool addresses on a LAN is
// TestSpeakerLayer2's).
func ingressAddress(t *testing.T, c *nodeCluster, client outside) string {
	t.Helper()
	c.withStdin(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: ingress, namespace: metallb-system}
spec:
  addresses: [`+ingressLBIP+`/32]
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		got, _ := c.kubectl("", "get", "service", "-n", "svcnet-ingress", "svcnet-ingress-controller", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		if got != ingressLBIP {
			return "the controller's Service has address " + got + ", want the pool's " + ingressLBIP
		}
		return ""
	})
	run(t, "ip", "-n", client.name, "route", "add", ingressLBIP+"/32", "via", client.nodeIP)
	return ingressLBIP
}

// curl runs curl in the client's namespace: -s, a 10 s limit, and the
// name resolved to ip on the URL's port.
func curl(t *testing.T, client outside, ip, rawURL string, args ...string) (string, error) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	all := append([]string{"--net=" + client.ns, "curl", "-sS", "--max-time", "10",
		"--resolve", u.Hostname() + ":" + port + ":" + ip}, args...)
	out, err := exec.Command("nsenter", append(all, rawURL)...).CombinedOutput()
	return string(out), err
}

// TestIngress is issue 17's Ingress acceptance: two Deployments behind
// /app and /api on web.example.test with TLS from a Secret, reached by a
// client outside the cluster through the controller's Service: each app
// by path over HTTPS (the Secret's certificate, HTTP/2) and HTTP, a 404
// for unknown hosts (with the default certificate), X-Forwarded-* with
// the client's own address, the Ingress's status, and an edit served
// within a second while a long request on the old configuration
// completes intact. (WebSocket upgrades are tested at unit level,
// internal/ingress/proxy: no built-in image speaks WebSocket.)
func TestIngress(t *testing.T) {
	c := startNodeCluster(t)
	client := outsideClient(t, c.netns, 0)
	if got := c.jsonpath("ingressclass", "svcnet", `{.spec.controller} {.metadata.annotations.ingressclass\.kubernetes\.io/is-default-class}`); got != "svcnet.io/ingress true" {
		t.Errorf("IngressClass svcnet: %q, want controller svcnet.io/ingress, the default", got)
	}
	dir := t.TempDir()
	certFile, keyFile := writeServerCert(t, dir, "web.example.test")
	c.must("create", "secret", "tls", "web-tls", "--cert="+certFile, "--key="+keyFile)
	c.withStdin(ingressManifest, "apply", "-f", "-")
	c.withStdin(webIngress("app", true), "apply", "-f", "-")
	for _, d := range []string{"app", "api", "netexec"} {
		c.must("rollout", "status", "deployment/"+d, "--timeout=90s")
	}
	c.must("rollout", "status", "-n", "svcnet-ingress", "deployment/svcnet-ingress-controller", "--timeout=90s")
	ip := ingressAddress(t, c, client)
	eventually(t, 10*time.Second, func() string {
		if got := c.jsonpath("ingress", "web", "{.status.loadBalancer.ingress[*].ip}"); got != ip {
			return fmt.Sprintf("Ingress web's status lists %q, want %s", got, ip)
		}
		return ""
	})

	tlsArgs := []string{"--cacert", certFile}
	answers := func(url, want string, args ...string) {
		t.Helper()
		eventually(t, 20*time.Second, func() string {
			if out, err := curl(t, client, ip, url, args...); err != nil || out != want {
				return fmt.Sprintf("%s: %v: %q, want %q", url, err, out, want)
			}
			return ""
		})
	}
	answers("https://web.example.test/app", "app\n", tlsArgs...)
	answers("https://web.example.test/api/v1", "api\n", tlsArgs...)
	answers("http://web.example.test/app", "app\n")
	answers("http://web.example.test/api", "api\n")
	answers("https://web.example.test/app", "app\n2", append(tlsArgs, "--http2", "-w", "%{http_version}")...)
	answers("https://web.example.test/app", "app\n1.1", append(tlsArgs, "--http1.1", "-w", "%{http_version}")...)
	answers("http://unknown.example.test/app", "404", "-o", "/dev/null", "-w", "%{http_code}")
	answers("http://web.example.test/other", "404", "-o", "/dev/null", "-w", "%{http_code}")
	// The Secret's certificate verified against itself above; other names
	// get the controller's own.
	if out, _ := curl(t, client, ip, "https://other.example.test/", "-k", "-v", "-o", "/dev/null"); !strings.Contains(out, "subject: O=Acme Co; CN=Kubernetes Ingress Controller Fake Certificate") {
		t.Errorf("certificate for another name:\n%s", out)
	}
	if out, _ := curl(t, client, ip, "https://web.example.test/", append(tlsArgs, "-v", "-o", "/dev/null")...); !strings.Contains(out, "subject: CN=web.example.test") {
		t.Errorf("certificate for web.example.test:\n%s", out)
	}
	// externalTrafficPolicy Local: the client's own address.
	for header, want := range map[string]string{"X-Forwarded-For": client.ip, "X-Real-IP": client.ip, "X-Forwarded-Proto": "https", "X-Forwarded-Host": "web.example.test"} {
		answers("https://web.example.test/header?key="+header, want, tlsArgs...)
	}

	// A long request on the old configuration, then an edit that sends
	// /app to api and drops /shell.
	const lines = 30
	cmd := fmt.Sprintf("for i in $(seq 1 %d); do echo line$i; sleep 0.1; done", lines)
	long := exec.Command("nsenter", "--net="+client.ns, "curl", "-sS", "--max-time", "30", "--cacert", certFile,
		"--resolve", "web.example.test:443:"+ip, "https://web.example.test/shell?cmd="+url.QueryEscape(cmd))
	var longOut strings.Builder
	long.Stdout, long.Stderr = &longOut, &longOut
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Process.Kill(); _ = long.Wait() })
	ctlPod := strings.Fields(c.must("get", "pods", "-n", "svcnet-ingress", "-o", "jsonpath={.items[*].status.podIP}"))
	if len(ctlPod) != 1 {
		t.Fatalf("controller pod IPs %v, want one", ctlPod)
	}
	metrics := func() string {
		out, _ := exec.Command("nsenter", "--net=/run/netns/"+c.netns, "curl", "-sS", "--max-time", "5",
			"http://"+ctlPod[0]+":10254/metrics").CombinedOutput()
		return string(out)
	}
	eventually(t, 10*time.Second, func() string {
		if m := metrics(); !strings.Contains(m, "\nsvcnet_ingress_requests_in_flight 1\n") {
			return "the long request is not in flight at the controller"
		}
		return ""
	})
	c.withStdin(webIngress("api", false), "apply", "-f", "-")
	edited := time.Now()
	answers("https://web.example.test/app", "api\n", tlsArgs...)
	if d := time.Since(edited); d > time.Second {
		t.Errorf("the edit was served after %s, want within a second", d)
	} else {
		t.Logf("the edit was served %s after kubectl apply returned", d.Round(time.Millisecond))
	}
	if out, _ := curl(t, client, ip, "https://web.example.test/shell", append(tlsArgs, "-o", "/dev/null", "-w", "%{http_code}")...); out != "404" {
		t.Errorf("/shell after the edit answered %s, want 404", out)
	}
	if err := long.Wait(); err != nil {
		t.Fatalf("the long request failed: %v: %s", err, longOut.String())
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, `line%d\n`, i)
	}
	if got := longOut.String(); !strings.Contains(got, `"output":"`+want.String()+`"`) {
		t.Errorf("the long request's answer is not whole:\n%s", got)
	}

	m := metrics()
	for _, want := range []string{
		`svcnet_ingress_requests_total{ingress="web",namespace="default",service="app",status="200"}`,
		`svcnet_ingress_requests_total{ingress="",namespace="",service="",status="404"}`,
		`svcnet_ingress_request_duration_seconds_bucket{ingress="web",namespace="default",service="api",le="+Inf"}`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// writeServerCert writes a self-signed certificate for host and its key
// into dir, as PEM files.
func writeServerCert(t *testing.T, dir, host string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(17), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for f, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
