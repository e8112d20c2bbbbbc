package nftables

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
)

var nsSeq atomic.Int32

// testNamespace makes a network namespace for the test, removed at its end.
func testNamespace(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("nftables tests need root, and CI runs as root")
		}
		t.Skip("nftables tests need root; CI runs them as root")
	}
	name := fmt.Sprintf("svcnet-nft-%d-%d", os.Getpid(), nsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

func nftList(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %v: %v: %s", args, err, out)
	}
	return string(out)
}

func TestBackendProgramsTheKernel(t *testing.T) {
	ns := testNamespace(t)
	b, err := New(Config{NetNS: "/var/run/netns/" + ns, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	// kube-proxy's TCP conntrack timeouts, in the node's namespace.
	for name, want := range map[string]string{"established": "86400", "close_wait": "3600"} {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_"+name).Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("nf_conntrack_tcp_timeout_%s: %q (%v), want %s", name, out, err, want)
		}
	}
	web := testService("web", corev1.ProtocolTCP, 30080, 1, "10.244.0.5", "10.244.0.6")
	dns := testService("dns", corev1.ProtocolUDP, 0, 0, "10.244.0.7")
	services := map[types.NamespacedName]*proxy.Service{web.Name: web, dns.Name: dns}
	if _, err := b.Sync(context.Background(), proxy.Update{Full: true, Services: services}); err != nil {
		t.Fatalf("full sync: %v", err)
	}
	out := nftList(t, ns, "list", "ruleset")
	t.Log(out)
	for _, want := range []string{"table ip svcnet", "table ip6 svcnet", "numgen random mod 2 0 goto endpoint-", "dnat to 10.244.0.5:80",
		`10.96.0.11 . tcp . 8080 comment "default/web ClusterIP" : goto service-`, `tcp . 30080 comment "default/web NodePort" : goto external-`} {
		if !strings.Contains(out, want) {
			t.Errorf("ruleset lacks %q", want)
		}
	}
	// A partial sync: web loses an endpoint, dns goes away.
	web2 := testService("web", corev1.ProtocolTCP, 30080, 1, "10.244.0.6")
	u := proxy.Update{Services: map[types.NamespacedName]*proxy.Service{web.Name: web2},
		Changed: map[types.NamespacedName]proxy.Change{web.Name: {Previous: web, Current: web2}, dns.Name: {Previous: dns}}}
	if _, err := b.Sync(context.Background(), u); err != nil {
		t.Fatalf("partial sync: %v", err)
	}
	out = nftList(t, ns, "list", "ruleset")
	if strings.Contains(out, "10.244.0.5") || strings.Contains(out, "default/dns") || !strings.Contains(out, "dnat to 10.244.0.6:80") {
		t.Errorf("after the partial sync:\n%s", out)
	}
	// A full sync over the same state changes nothing visible.
	if _, err := b.Sync(context.Background(), proxy.Update{Full: true, Services: u.Services}); err != nil {
		t.Fatalf("second full sync: %v", err)
	}
	if again := nftList(t, ns, "list", "ruleset"); again != out {
		t.Errorf("full resync changed the ruleset:\n%s\nwas:\n%s", again, out)
	}
	if err := Cleanup("/var/run/netns/" + ns); err != nil {
		t.Fatal(err)
	}
	if out := nftList(t, ns, "list", "ruleset"); strings.Contains(out, "svcnet") {
		t.Errorf("cleanup left:\n%s", out)
	}
}
