package dns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func webSlice(ip string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Hostname: ptr.To("web-0"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

// get fetches an HTTP URL and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Run serves what the API holds, follows changes within a second, reports
// ready once its caches are filled, and serves its metrics.
func TestRunServes(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		webSlice("10.244.0.5"),
	)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	health, ready, metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Client: client, Zone: "cluster.local", NameServers: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
			Address: addr, Upstreams: []string{"127.0.0.1:1"}, Health: health, Ready: ready, Metrics: metrics,
		})
	}()
	name := "web-0.web.default.svc.cluster.local."
	answer := func() string {
		resp := dnstest.Query(t, "udp", addr, name, dns.TypeA, 0)
		if len(resp.Answer) != 1 {
			return dns.RcodeToString[resp.Rcode]
		}
		return resp.Answer[0].(*dns.A).A.String()
	}
	waitFor(t, 5*time.Second, func() bool { return probe(addr, name) && answer() == "10.244.0.5" })
	waitFor(t, 5*time.Second, func() bool {
		code, body := get(t, "http://"+ready+"/ready")
		return code == http.StatusOK && body == "OK"
	})
	if code, _ := get(t, "http://"+health+"/health"); code != http.StatusOK {
		t.Errorf("/health: %d", code)
	}

	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, webSlice("10.244.0.9"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, time.Second, func() bool { return answer() == "10.244.0.9" })
	t.Logf("answer followed the slice in %s", time.Since(start))

	if _, body := get(t, "http://"+metrics+"/metrics"); !strings.Contains(body, `svcnet_dns_requests_total{family="1",proto="udp",type="A",zone="cluster.local."}`) {
		t.Errorf("metrics lack the queries:\n%s", body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A server asked to stop before its caches are filled (the API is slow
// or gone) stops all the same.
func TestRunStopsBeforeSync(t *testing.T) {
	client := fake.NewClientset()
	listing := make(chan struct{})
	var once sync.Once
	client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(listing) })
		return true, nil, errors.New("the API server is away")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: client, Zone: "cluster.local", Address: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			Lameduck: 100 * time.Millisecond})
	}()
	<-listing
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of its context's end while its caches were not filled")
	}
}

// probe reports whether addr answers at all.
func probe(addr, name string) bool {
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	_, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	return err == nil
}

func waitFor(t *testing.T, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An upstream that is the cluster DNS itself is dropped, not looped to.
func TestWithoutLoops(t *testing.T) {
	got := withoutLoops([]string{"10.96.0.10:53", "192.0.2.53:53", "[fd00::a]:53"},
		[]netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")})
	if len(got) != 1 || got[0] != "192.0.2.53:53" {
		t.Errorf("upstreams %v, want only 192.0.2.53:53", got)
	}
}
