package nftables

import (
	"context"
	"net/netip"
	"os/exec"
	"regexp"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/proxy"
)

func lines(list []proxy.Frontend) []string {
	out := make([]string, len(list))
	for i, f := range list {
		out[i] = f.Service() + " " + string(f.Kind) + " " + f.String()
	}
	return out
}

func TestReadFrontendsFromTheKernel(t *testing.T) {
	ns := testNamespace(t)
	path := "/var/run/netns/" + ns
	ctx := context.Background()
	// A namespace without the proxy's tables has no frontends.
	if got, err := ReadFrontends(ctx, path, ""); err != nil || len(got) != 0 {
		t.Fatalf("before any sync: %v, %v", got, err)
	}
	b, err := New(Config{NetNS: path, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	web := testService("web", corev1.ProtocolTCP, 30080, 1, "10.244.0.5", "10.244.0.6")
	web.Ports[0].ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	web.Ports[0].LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	web.Ports[0].AffinitySeconds = 60
	empty := testService("empty", corev1.ProtocolUDP, 0, 2)
	empty.Ports[0].Name = "dns"
	remote := testService("remote", corev1.ProtocolTCP, 0, 3)
	remote.Ports[0].InternalLocal = true
	remote.Ports[0].Endpoints = []proxy.Endpoint{{Addr: netip.MustParseAddr("10.244.1.4"), Port: 80, Ready: true, Serving: true}}
	services := map[types.NamespacedName]*proxy.Service{web.Name: web, empty.Name: empty, remote.Name: remote}
	if _, err := b.Sync(ctx, proxy.Update{Full: true, Services: services}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, err := b.Frontends(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"default/empty ClusterIP 10.96.0.12:8080/UDP → reject (no endpoints)",
		"default/remote ClusterIP 10.96.0.13:8080/TCP → drop (no local endpoints)",
		"default/web ClusterIP 10.96.0.11:8080/TCP → 10.244.0.5:80/TCP, 10.244.0.6:80/TCP",
		"default/web ExternalIP 192.0.2.1:8080/TCP → 10.244.0.5:80/TCP, 10.244.0.6:80/TCP",
		"default/web LoadBalancer 192.0.2.10:8080/TCP → 10.244.0.5:80/TCP, 10.244.0.6:80/TCP",
		"default/web NodePort 0.0.0.0:30080/TCP → 10.244.0.5:80/TCP, 10.244.0.6:80/TCP",
	}
	if diff := gocmp.Diff(want, lines(got)); diff != "" {
		t.Errorf("frontends after the sync (-want +got):\n%s", diff)
	}
	if got[0].PortName != "dns" || got[2].PortName != "" {
		t.Errorf("port names %q, %q", got[0].PortName, got[2].PortName)
	}
	// One Service's frontends, read alone.
	one, err := b.Frontends(ctx, "default/empty")
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(want[:1], lines(one)); diff != "" {
		t.Errorf("frontends of default/empty (-want +got):\n%s", diff)
	}

	// Delete the rule that picks the first endpoint of web, by hand: the
	// kernel no longer sends anything there, and the read-back says so.
	chain := clusterPrefix + portChainBase(web.Name, web.Ports[0])
	listing := nftList(t, ns, "-a", "list", "chain", "ip", TableName, chain)
	m := regexp.MustCompile(`numgen random mod 2 0 goto endpoint-\S+10\.244\.0\.5/80 # handle (\d+)`).FindStringSubmatch(listing)
	if m == nil {
		t.Fatalf("no rule for 10.244.0.5 in:\n%s", listing)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "delete", "rule", "ip", TableName, chain, "handle", m[1]).CombinedOutput(); err != nil {
		t.Fatalf("nft delete rule: %v: %s", err, out)
	}
	got, err = ReadFrontends(ctx, path, "")
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"default/empty ClusterIP 10.96.0.12:8080/UDP → reject (no endpoints)",
		"default/remote ClusterIP 10.96.0.13:8080/TCP → drop (no local endpoints)",
		"default/web ClusterIP 10.96.0.11:8080/TCP → 10.244.0.6:80/TCP",
		"default/web ExternalIP 192.0.2.1:8080/TCP → 10.244.0.6:80/TCP",
		"default/web LoadBalancer 192.0.2.10:8080/TCP → 10.244.0.6:80/TCP",
		"default/web NodePort 0.0.0.0:30080/TCP → 10.244.0.6:80/TCP",
	}
	if diff := gocmp.Diff(want, lines(got)); diff != "" {
		t.Errorf("frontends after a rule was deleted by hand (-want +got):\n%s", diff)
	}

	// The DNAT rule of the remaining endpoint deleted too: web's traffic
	// goes nowhere.
	epChain := endpointPrefix + endpointChainBase(web.Name, web.Ports[0], web.Ports[0].Endpoints[1])
	listing = nftList(t, ns, "-a", "list", "chain", "ip", TableName, epChain)
	m = regexp.MustCompile(`dnat to 10\.244\.0\.6:80 # handle (\d+)`).FindStringSubmatch(listing)
	if m == nil {
		t.Fatalf("no DNAT to 10.244.0.6 in:\n%s", listing)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "delete", "rule", "ip", TableName, epChain, "handle", m[1]).CombinedOutput(); err != nil {
		t.Fatalf("nft delete rule: %v: %s", err, out)
	}
	got, err = ReadFrontends(ctx, path, "")
	if err != nil {
		t.Fatal(err)
	}
	if l := lines(got)[2]; l != "default/web ClusterIP 10.96.0.11:8080/TCP → no backends" {
		t.Errorf("without DNAT rules: %s", l)
	}
	if err := b.Cleanup(); err != nil {
		t.Fatal(err)
	}
}
