package doctor

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/proxy"
)

// Each node's data plane is compared with the EndpointSlices' ready
// endpoints: a missing frontend or other backends is drift.
func TestDataPlane(t *testing.T) {
	labels := map[string]string{"app": "web"}
	client := fake.NewClientset(service("web", labels), pod("default", "web-1", "10.244.0.5", labels), pod("default", "web-2", "10.244.0.6", labels),
		slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}, endpoint{pod: "web-2", ip: "10.244.0.6", node: "node-a"}))
	frontend := func(backends ...string) proxy.Frontend {
		f := proxy.Frontend{Namespace: "default", Name: "web", PortName: "http", Kind: proxy.KindClusterIP,
			Address: netip.MustParseAddrPort("10.96.0.12:80"), Protocol: corev1.ProtocolTCP}
		for _, b := range backends {
			f.Backends = append(f.Backends, netip.MustParseAddrPort(b))
		}
		return f
	}
	nodes := []NodeFrontends{
		{Node: "in-sync", Frontends: []proxy.Frontend{frontend("10.244.0.6:80", "10.244.0.5:80")}},
		{Node: "one-short", Frontends: []proxy.Frontend{frontend("10.244.0.5:80")}},
		{Node: "no-rule"},
		{Node: "unreachable", Err: errors.New("503 the node's Service proxy has not started yet")},
	}
	r, err := Diagnose(context.Background(), client, "default", "web", Options{
		DataPlane: func(context.Context) ([]NodeFrontends, error) { return nodes, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	drift := map[string]string{}
	for _, f := range r.Findings {
		switch f.Code {
		case DataPlaneDrift:
			drift[f.Evidence[0].Value] = f.Sentence
		case DataPlaneUnreadable:
			drift["unreadable"] = f.Sentence
		}
	}
	if r.Healthy || len(drift) != 3 {
		t.Fatalf("findings %+v", r.Findings)
	}
	if want := "On node one-short, 10.96.0.12:80/TCP goes to 10.244.0.5:80, but the EndpointSlices list 10.244.0.5:80, 10.244.0.6:80 as ready."; !strings.HasPrefix(drift["one-short"], want) {
		t.Errorf("drift of one-short: %q, want %q...", drift["one-short"], want)
	}
	if want := "Node no-rule's data plane has no rule for 10.96.0.12:80/TCP"; !strings.HasPrefix(drift["no-rule"], want) {
		t.Errorf("drift of no-rule: %q, want %q...", drift["no-rule"], want)
	}
	if !strings.Contains(drift["unreadable"], "node unreachable could not be read") {
		t.Errorf("unreadable node: %q", drift["unreadable"])
	}

	// A Service without endpoints is rejected, which is no drift.
	empty := fake.NewClientset(service("web", labels))
	rejecting := frontend()
	rejecting.Reject = true
	r, err = Diagnose(context.Background(), empty, "default", "web", Options{DataPlane: func(context.Context) ([]NodeFrontends, error) {
		return []NodeFrontends{{Node: "a", Frontends: []proxy.Frontend{rejecting}}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		if f.Code == DataPlaneDrift {
			t.Errorf("a rejecting frontend of a Service without endpoints is drift: %s", f.Sentence)
		}
	}
}
