package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// gatewayExample is docs/gateway.md's manifest: Deployments v1 and v2
// behind the Gateway web and the HTTPRoute web on web.example.test.
const gatewayExample = "../../docs/examples/gateway.yaml"

// gatewayBroken is a route to a Service that does not exist, and a
// Gateway whose only listener is on a port the proxy does not serve.
const gatewayBroken = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken}
spec:
  parentRefs: [{name: web}]
  hostnames: [broken.example.test]
  rules: [{backendRefs: [{name: nope, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: alt}
spec:
  gatewayClassName: svcnet
  listeners: [{name: alt, protocol: HTTP, port: 8080}]
`

// gatewaySecure is an HTTPS listener with the certificate of the Secret
// secure-tls and a route to v2 on it alone.
const gatewaySecure = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: secure}
spec:
  gatewayClassName: svcnet
  listeners:
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.example.test
    tls: {certificateRefs: [{name: secure-tls}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure}
spec:
  parentRefs: [{name: secure}]
  rules: [{backendRefs: [{name: v2, port: 80}]}]
`

// TestGateway is issue 17's Gateway API acceptance: a Gateway of class
// svcnet with an HTTP listener and an HTTPRoute with a 90/10 split, a
// header match and a redirect, served by the Ingress controller's proxy
// to a client outside the cluster, with the status the Gateway API
// specifies on the GatewayClass, the Gateways and the HTTPRoutes; an
// HTTPS listener serves its Secret's certificate.
func TestGateway(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	client := outsideClient(t, c.netns, 0)
	c.must("rollout", "status", "-n", "svcnet-ingress", "deployment/svcnet-ingress-controller", "--timeout=90s")
	eventually(t, 20*time.Second, func() string {
		if got := c.jsonpath("gatewayclass", "svcnet", `{.spec.controllerName} {.status.conditions[?(@.type=="Accepted")].status}`); got != "svcnet.io/gateway-controller True" {
			return fmt.Sprintf("GatewayClass svcnet: %q, want controller svcnet.io/gateway-controller, Accepted True", got)
		}
		return ""
	})
	c.must("apply", "-f", gatewayExample)
	for _, d := range []string{"v1", "v2"} {
		c.must("rollout", "status", "deployment/"+d, "--timeout=90s")
	}
	ip := ingressAddress(t, c, client)

	gen := c.jsonpath("gateway", "web", "{.metadata.generation}")
	eventually(t, 20*time.Second, func() string {
		want := fmt.Sprintf("True/Accepted True/Programmed %s %s http 1 True/Accepted True/Programmed True/ResolvedRefs False/NoConflicts HTTPRoute", gen, ip)
		got := c.jsonpath("gateway", "web", `{range .status.conditions[*]}{.status}/{.reason} {end}{.status.conditions[0].observedGeneration} {.status.addresses[*].value} `+
			`{.status.listeners[0].name} {.status.listeners[0].attachedRoutes} {range .status.listeners[0].conditions[*]}{.status}/{.reason} {end}{.status.listeners[0].supportedKinds[*].kind}`)
		if got != want {
			return fmt.Sprintf("Gateway web status: %q, want %q", got, want)
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string {
		want := "svcnet.io/gateway-controller web True/Accepted True/ResolvedRefs 1"
		got := c.jsonpath("httproute", "web", `{.status.parents[*].controllerName} {.status.parents[0].parentRef.name} {range .status.parents[0].conditions[*]}{.status}/{.reason} {end}{.status.parents[0].conditions[0].observedGeneration}`)
		if got != want {
			return fmt.Sprintf("HTTPRoute web status: %q, want %q", got, want)
		}
		return ""
	})

	answers := func(url, want string, args ...string) {
		t.Helper()
		eventually(t, 20*time.Second, func() string {
			if out, err := curl(t, client, ip, url, args...); err != nil || out != want {
				return fmt.Sprintf("%s %v: %v: %q, want %q", url, args, err, out, want)
			}
			return ""
		})
	}
	answers("http://web.example.test/", "v2\n", "-H", "X-Version: v2")
	answers("http://web.example.test/anything", "v2\n", "-H", "X-Version: v2")
	answers("http://web.example.test/old?q=1", "301 http://web.example.test/new?q=1", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}")
	answers("http://other.example.test/", "404", "-o", "/dev/null", "-w", "%{http_code}")

	// 200 requests on one connection: about 90% v1.
	const n = 200
	args := make([]string, 0, n-1)
	for range n - 1 {
		args = append(args, "http://web.example.test/")
	}
	out, err := curl(t, client, ip, "http://web.example.test/", args...)
	if err != nil {
		t.Fatalf("%d requests: %v: %s", n, err, out)
	}
	count := map[string]int{}
	for _, l := range strings.Fields(out) {
		count[l]++
	}
	if count["v1"]+count["v2"] != n {
		t.Fatalf("answers %v, want %d of v1 and v2", count, n)
	}
	// Binomial(200, 0.9): mean 180, deviation 4.2; the band is 150..196.
	if share := float64(count["v1"]) / n; share < 0.75 || share > 0.98 {
		t.Errorf("v1 got %d of %d requests (%.0f%%), want about 90%%", count["v1"], n, 100*share)
	} else {
		t.Logf("v1 %d, v2 %d of %d requests", count["v1"], count["v2"], n)
	}

	// With the header, every request goes to v2 (without its rule, 90%
	// would go to v1).
	args = []string{"-H", "X-Version: v2"}
	for range 49 {
		args = append(args, "http://web.example.test/")
	}
	out, err = curl(t, client, ip, "http://web.example.test/", args...)
	if got := strings.Fields(out); err != nil || len(got) != 50 || slices.ContainsFunc(got, func(s string) bool { return s != "v2" }) {
		t.Errorf("50 requests with X-Version: v2: %v: %q, want v2 from each", err, out)
	}

	// HTTPS with the listener's certificate; the route is not on port 80.
	certFile, keyFile := writeServerCert(t, t.TempDir(), "secure.example.test")
	c.must("create", "secret", "tls", "secure-tls", "--cert="+certFile, "--key="+keyFile)
	c.withStdin(gatewaySecure, "apply", "-f", "-")
	answers("https://secure.example.test/", "v2\n", "--cacert", certFile)
	if out, _ := curl(t, client, ip, "https://secure.example.test/", "--cacert", certFile, "-v", "-o", "/dev/null"); !strings.Contains(out, "subject: CN=secure.example.test") {
		t.Errorf("certificate for secure.example.test:\n%s", out)
	}
	answers("http://secure.example.test/", "404", "-o", "/dev/null", "-w", "%{http_code}")

	// What does not resolve: a missing backend answers 500 and says so
	// in the route's status; a listener on a port the proxy does not
	// serve is not accepted.
	c.withStdin(gatewayBroken, "apply", "-f", "-")
	eventually(t, 10*time.Second, func() string {
		got := c.jsonpath("httproute", "broken", `{range .status.parents[0].conditions[*]}{.type}={.status}/{.reason} {end}`)
		if want := "Accepted=True/Accepted ResolvedRefs=False/BackendNotFound "; got != want {
			return fmt.Sprintf("HTTPRoute broken status: %q, want %q", got, want)
		}
		return ""
	})
	answers("http://broken.example.test/", "500", "-o", "/dev/null", "-w", "%{http_code}")
	eventually(t, 10*time.Second, func() string {
		got := c.jsonpath("gateway", "alt", `{range .status.conditions[*]}{.type}={.status}/{.reason} {end}{range .status.listeners[0].conditions[*]}{.type}={.status}/{.reason} {end}`)
		want := "Accepted=False/ListenersNotValid Programmed=False/Invalid Accepted=False/PortUnavailable Programmed=False/Invalid ResolvedRefs=True/ResolvedRefs Conflicted=False/NoConflicts "
		if got != want {
			return fmt.Sprintf("Gateway alt status: %q, want %q", got, want)
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string {
		if got := c.jsonpath("gateway", "web", "{.status.listeners[0].attachedRoutes}"); got != "2" {
			return fmt.Sprintf("Gateway web's listener has %s routes attached, want 2", got)
		}
		return ""
	})
}
