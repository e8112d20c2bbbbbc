package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// homelabPool is the seed's MetalLB configuration, as a user applies it.
const homelabPool = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: homelab
  namespace: metallb-system
spec:
  addresses:
  - 10.0.0.200-10.0.0.215
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: homelab
  namespace: metallb-system
spec:
  ipAddressPools: [homelab]
`

// lbService is a LoadBalancer Service on port (TCP) with the annotations
// and spec lines given.
func lbService(name string, port int, annotations, spec string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  annotations: {%[2]s}
spec:
  type: LoadBalancer
  selector: {app: %[1]s}
  ports: [{port: %[3]d}]
%[4]s`, name, annotations, port, spec)
}

// externalIP is the EXTERNAL-IP column of `kubectl get svc NAME`.
func (c *nodeCluster) externalIP(name string) string {
	return strings.TrimSpace(c.must("get", "svc", name, "--no-headers", "-o", "custom-columns=IP:.status.loadBalancer.ingress[*].ip"))
}

// waitExternalIP waits until `kubectl get svc` shows the Service with
// EXTERNAL-IP want (<pending> while it has none).
func (c *nodeCluster) waitExternalIP(name, want string) {
	c.t.Helper()
	eventually(c.t, 15*time.Second, func() string {
		f := strings.Fields(c.must("get", "svc", name, "--no-headers"))
		if len(f) < 4 || f[3] != want {
			return fmt.Sprintf("kubectl get svc %s: %v, want EXTERNAL-IP %s", name, f, want)
		}
		return ""
	})
}

// waitEvent waits for an event of the Service with reason and message.
func (c *nodeCluster) waitEvent(name, reason, message string) {
	c.t.Helper()
	eventually(c.t, 15*time.Second, func() string {
		out := c.must("get", "events", "--field-selector", "involvedObject.kind=Service,involvedObject.name="+name,
			"-o", "custom-columns=TYPE:.type,REASON:.reason,SOURCE:.source.component,MESSAGE:.message", "--no-headers")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 4 && f[1] == reason && f[2] == "metallb-controller" && strings.Join(f[3:], " ") == message {
				return ""
			}
		}
		return fmt.Sprintf("no event %s %q from metallb-controller on service %s:\n%s", reason, message, name, out)
	})
}

// TestLoadBalancerIPAM is the seed's homelab: MetalLB's pool
// 10.0.0.200-10.0.0.215 applied as a user would, Services getting its
// addresses in order, asked-for addresses, a full pool, release on
// delete and type change, shared addresses, a pool that assigns only on
// request, and a restart that keeps every address.
func TestLoadBalancerIPAM(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t, "--disable", "ingress")
	c.withStdin(homelabPool, "apply", "-f", "-")

	// The seed's four Services, one after the other.
	apps := []string{"gitea", "argocd", "harbor", "grafana"}
	for _, app := range apps {
		c.must("create", "service", "loadbalancer", app, "--tcp=80:3000")
	}
	for i, app := range apps {
		c.waitExternalIP(app, fmt.Sprintf("10.0.0.%d", 200+i))
	}
	c.waitEvent("gitea", "IPAllocated", `Assigned IP ["10.0.0.200"]`)
	if got := c.jsonpath("service", "gitea", "{.status.loadBalancer.ingress[0].ipMode} {.metadata.annotations.metallb\\.io/ip-allocated-from-pool}"); got != "VIP homelab" {
		t.Errorf("gitea: ipMode and pool annotation %q, want VIP homelab", got)
	}

	// Asked-for addresses, by the field and by MetalLB's annotation.
	c.withStdin(lbService("wiki", 80, "", "  loadBalancerIP: 10.0.0.210\n"), "apply", "-f", "-")
	c.withStdin(lbService("chat", 80, `metallb.io/loadBalancerIPs: "10.0.0.211"`, ""), "apply", "-f", "-")
	c.waitExternalIP("wiki", "10.0.0.210")
	c.waitExternalIP("chat", "10.0.0.211")

	// Ten more fill the pool's sixteen addresses; the next waits.
	for i := range 10 {
		c.must("create", "service", "loadbalancer", fmt.Sprintf("fill%d", i), "--tcp=80:80")
	}
	for i := range 10 {
		eventually(t, 15*time.Second, func() string {
			if ip := c.externalIP(fmt.Sprintf("fill%d", i)); !strings.HasPrefix(ip, "10.0.0.2") {
				return fmt.Sprintf("fill%d has EXTERNAL-IP %q", i, ip)
			}
			return ""
		})
	}
	c.must("create", "service", "loadbalancer", "overflow", "--tcp=80:80")
	c.waitEvent("overflow", "AllocationFailed", `Failed to allocate IP for "default/overflow": no available IPs`)
	c.waitExternalIP("overflow", "<pending>")
	if out := c.must("describe", "service", "overflow"); !strings.Contains(out, "AllocationFailed") {
		t.Errorf("kubectl describe service overflow shows no AllocationFailed event:\n%s", out)
	}
	eventually(t, 10*time.Second, func() string {
		if status := c.must("get", "ipaddresspool", "homelab", "-n", "metallb-system", "-o", "jsonpath={.status.assignedIPv4}/{.status.availableIPv4}"); status != "16/0" {
			return "pool homelab's assignedIPv4/availableIPv4 " + status + ", want 16/0"
		}
		return ""
	})

	// A deleted Service's address goes to the one waiting.
	freed := c.externalIP("fill3")
	c.must("delete", "service", "fill3")
	c.waitExternalIP("overflow", freed)

	// A Service that is no LoadBalancer any more loses its address.
	c.must("patch", "service", "grafana", "-p", `{"spec":{"type":"ClusterIP"}}`)
	eventually(t, 15*time.Second, func() string {
		if st := c.jsonpath("service", "grafana", "{.status.loadBalancer}"); st != "{}" && st != "" {
			return "grafana, now ClusterIP, has status.loadBalancer " + st
		}
		return ""
	})
	c.waitExternalIP("grafana", "<none>")

	// Two Services of one sharing key and different ports share the
	// address grafana freed; a third on a port in use does not fit.
	shared := `metallb.io/allow-shared-ip: "web"`
	c.withStdin(lbService("web-http", 80, shared, "")+"---\n"+lbService("web-https", 443, shared, ""), "apply", "-f", "-")
	c.waitExternalIP("web-http", "10.0.0.203")
	c.waitExternalIP("web-https", "10.0.0.203")
	c.withStdin(lbService("web-clash", 80, shared+`, metallb.io/loadBalancerIPs: "10.0.0.203"`, ""), "apply", "-f", "-")
	c.waitEvent("web-clash", "AllocationFailed", `Failed to allocate IP for "default/web-clash": port TCP/80 is already in use on "10.0.0.203"`)

	// A pool with autoAssign false gives addresses only when asked by name.
	c.withStdin(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: reserved
  namespace: metallb-system
spec:
  addresses: [10.0.1.10/31]
  autoAssign: false
`, "apply", "-f", "-")
	c.must("create", "service", "loadbalancer", "auto", "--tcp=80:80")
	c.waitEvent("auto", "AllocationFailed", `Failed to allocate IP for "default/auto": no available IPs`)
	c.withStdin(lbService("pinned", 80, `metallb.io/address-pool: reserved`, ""), "apply", "-f", "-")
	c.waitExternalIP("pinned", "10.0.1.10")

	// A restart keeps every address, and hands out the next one free.
	before := c.must("get", "svc", "-o", "custom-columns=NAME:.metadata.name,IP:.status.loadBalancer.ingress[*].ip", "--no-headers")
	c.restart()
	c.withStdin(lbService("after", 80, `metallb.io/address-pool: reserved`, ""), "apply", "-f", "-")
	c.waitExternalIP("after", "10.0.1.11")
	if after := c.must("get", "svc", "-o", "custom-columns=NAME:.metadata.name,IP:.status.loadBalancer.ingress[*].ip", "--no-headers"); !sameLines(before, after, "after") {
		t.Errorf("addresses before the restart:\n%s\nafter:\n%s", before, after)
	}
	c.waitExternalIP("auto", "<pending>")

	// A pool that overlaps another makes the configuration invalid, as
	// MetalLB's ConfigurationState says; the one in force stays.
	state := func(want string) {
		t.Helper()
		eventually(t, 15*time.Second, func() string {
			if got := c.must("get", "configurationstate", "controller", "-n", "metallb-system", "-o", "jsonpath={.status.result}: {.status.errorSummary}"); got != want {
				return "ConfigurationState controller: " + got + ", want " + want
			}
			return ""
		})
	}
	state("Valid: ")
	c.withStdin("apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: overlap, namespace: metallb-system}\nspec: {addresses: [10.0.0.210/32]}\n", "apply", "-f", "-")
	state(`Invalid: configuration error: CIDR "10.0.0.210/32" in pool "overlap" overlaps with already defined CIDR "10.0.0.208/29"`)
	c.must("delete", "ipaddresspool", "overlap", "-n", "metallb-system")
	state("Valid: ")
	c.waitExternalIP("wiki", "10.0.0.210")
}

// sameLines says whether a and b hold the same lines, but for the line
// of name in b.
func sameLines(a, b, name string) bool {
	var kept []string
	for _, l := range strings.Split(strings.TrimSpace(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] != name {
			kept = append(kept, strings.Join(f, " "))
		}
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(a), "\n") {
		want = append(want, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(kept, "\n") == strings.Join(want, "\n")
}

// TestLoadBalancerUpPool: `svcnet up --lb-pool` makes the pool default
// (both families) with its L2Advertisement, and Services use it.
func TestLoadBalancerUpPool(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t, "--lb-pool", "10.0.3.0/31,fd00:3::/126", "--disable", "ingress")
	if got := c.must("get", "ipaddresspool,l2advertisement", "-n", "metallb-system", "-o",
		`jsonpath={range .items[*]}{.kind} {.metadata.name} {.spec.addresses} {.spec.ipAddressPools}|{end}`); got != `IPAddressPool default ["10.0.3.0/31","fd00:3::/126"] |L2Advertisement default  ["default"]|` {
		t.Errorf("up's pool and advertisement: %s", got)
	}
	c.must("create", "service", "loadbalancer", "web", "--tcp=80:80")
	c.waitExternalIP("web", "10.0.3.0")
}

// TestLoadBalancerNodesPool: `svcnet up --nodes 2` offers a pool on the
// nodes' network, above the nodes' addresses.
func TestLoadBalancerNodesPool(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	c := startOnMachine(t, m, "--nodes", "2", "--node-name", fmt.Sprintf("e2elb%d", os.Getpid()), "--disable", "ingress")
	if got := c.must("get", "ipaddresspool", "default", "-n", "metallb-system", "-o", "jsonpath={.spec.addresses}"); got != `["10.250.0.200-10.250.0.250"]` {
		t.Errorf("the nodes' pool has addresses %s", got)
	}
	c.must("create", "service", "loadbalancer", "web", "--tcp=80:80")
	eventually(t, 15*time.Second, func() string {
		if ip := c.jsonpath("service", "web", "{.status.loadBalancer.ingress[0].ip}"); ip != "10.250.0.200" {
			return "web has EXTERNAL-IP " + ip + ", want 10.250.0.200"
		}
		return ""
	})
}
