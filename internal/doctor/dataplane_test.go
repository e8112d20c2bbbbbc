package doctor

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

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
	now := time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)
	nodes := []proxy.NodeFrontends{
		{Node: "in-sync", Frontends: []proxy.Frontend{frontend("10.244.0.6:80", "10.244.0.5:80")}, LastSync: now.Add(-3 * time.Second)},
		{Node: "one-short", Frontends: []proxy.Frontend{frontend("10.244.0.5:80")}, LastSync: now.Add(-90 * time.Second)},
		{Node: "no-rule"},
		{Node: "unreachable", Error: "503 the node's Service proxy has not started yet"},
	}
	var asked string
	r, err := Diagnose(context.Background(), client, "default", "web", Options{
		DataPlane: func(_ context.Context, service string) ([]proxy.NodeFrontends, error) {
			asked = service
			return nodes, nil
		},
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	if asked != "default/web" || len(r.DataPlane) != 4 {
		t.Errorf("asked the data plane for %q and kept %d nodes", asked, len(r.DataPlane))
	}
	drift := map[string]string{}
	var inSync, lastSync []string
	for _, f := range r.Findings {
		switch f.Code {
		case DataPlaneDrift:
			drift[f.Evidence[0].Value] = f.Sentence
			lastSync = append(lastSync, f.Evidence[len(f.Evidence)-1].Name+": "+f.Evidence[len(f.Evidence)-1].Value)
		case DataPlaneUnreadable:
			drift["unreadable"] = f.Sentence
		case DataPlaneInSync:
			for _, e := range f.Evidence {
				inSync = append(inSync, e.Name+": "+e.Value)
			}
		}
	}
	// How long ago each node's proxy synced, as kubectl writes ages.
	if want := []string{"last sync: 90s ago", "last sync: unknown"}; !slices.Equal(lastSync, want) {
		t.Errorf("drift's last sync %q, want %q", lastSync, want)
	}
	if want := []string{"node in-sync: last sync 3s ago"}; !slices.Equal(inSync, want) {
		t.Errorf("in sync %q, want %q", inSync, want)
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
	r, err = Diagnose(context.Background(), empty, "default", "web", Options{DataPlane: func(context.Context, string) ([]proxy.NodeFrontends, error) {
		return []proxy.NodeFrontends{{Node: "a", Frontends: []proxy.Frontend{rejecting}}}, nil
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
