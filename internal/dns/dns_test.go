package dns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/dns/dnstest"
	"github.com/svcnet/svcnet/internal/dns/publish"
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

// Run serves what the API holds, follows changes within a second,
// publishes the node behind kube-dns and unpublishes it when it stops.
func TestRunServesAndPublishes(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		webSlice("10.244.0.5"),
	)
	port, metricsPort := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Client: client, NodeName: "n1", Zone: "cluster.local", ServiceIP: "10.96.0.10",
			Address: netip.MustParseAddr("127.0.0.1"), Port: port, MetricsPort: metricsPort,
			Upstreams: []string{"127.0.0.1:1"}, Publish: true,
			Listen: net.Listen, ListenPacket: net.ListenPacket, Dial: (&net.Dialer{}).DialContext,
		})
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	name := "web-0.web.default.svc.cluster.local."
	answer := func() string {
		resp := dnstest.Query(t, "udp", addr, name, dns.TypeA, 0)
		if len(resp.Answer) != 1 {
			return dns.RcodeToString[resp.Rcode]
		}
		return resp.Answer[0].(*dns.A).A.String()
	}
	waitFor(t, 5*time.Second, func() bool { return probe(addr, name) && answer() == "10.244.0.5" })

	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, webSlice("10.244.0.9"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, time.Second, func() bool { return answer() == "10.244.0.9" })
	t.Logf("answer followed the slice in %s", time.Since(start))

	waitFor(t, 5*time.Second, func() bool {
		es, err := client.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, publish.SliceName("n1"), metav1.GetOptions{})
		return err == nil && es.Endpoints[0].Addresses[0] == "127.0.0.1" && es.OwnerReferences[0].UID == "node-uid" &&
			es.Labels[discoveryv1.LabelServiceName] == "kube-dns"
	})
	svc, err := client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != "10.96.0.10" || svc.Spec.Selector != nil || len(svc.Spec.Ports) != 3 {
		t.Errorf("kube-dns Service: %v %v", svc, err)
	}

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `svcnet_dns_requests_total{family="1",proto="udp",type="A",zone="cluster.local."}`) {
		t.Errorf("metrics lack the queries:\n%s", body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("kube-system").Get(context.Background(), publish.SliceName("n1"), metav1.GetOptions{}); err == nil {
		t.Error("the node's kube-dns slice outlived the DNS server")
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
