package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/internal/proxy"
)

func addrs(list ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range list {
		out = append(out, netip.MustParseAddrPort(a))
	}
	return out
}

var (
	webFrontend = proxy.Frontend{Namespace: "default", Name: "web", Kind: proxy.KindClusterIP, Protocol: corev1.ProtocolTCP,
		Address: netip.MustParseAddrPort("10.96.100.10:80"), Backends: addrs("10.244.0.5:80", "10.244.0.6:80")}
	dnsFrontend = proxy.Frontend{Namespace: "kube-system", Name: "kube-dns", PortName: "dns", Kind: proxy.KindClusterIP,
		Protocol: corev1.ProtocolUDP, Address: netip.MustParseAddrPort("10.96.0.10:53"), Backends: addrs("10.244.0.150:53")}
	typoFrontend = proxy.Frontend{Namespace: "default", Name: "typo", Kind: proxy.KindClusterIP, Protocol: corev1.ProtocolTCP,
		Address: netip.MustParseAddrPort("10.96.7.7:80"), Reject: true}
	nodePortFrontend = proxy.Frontend{Namespace: "default", Name: "web", Kind: proxy.KindNodePort, Protocol: corev1.ProtocolTCP,
		Address: netip.MustParseAddrPort("0.0.0.0:30080"), Backends: addrs("10.244.0.5:80")}
)

func TestWriteFrontends(t *testing.T) {
	var b bytes.Buffer
	err := writeFrontends(&b, []nodeFrontends{
		{Node: "n1", Frontends: []proxy.Frontend{typoFrontend, webFrontend, nodePortFrontend, dnsFrontend, {Protocol: corev1.ProtocolTCP, Address: netip.MustParseAddrPort("10.96.9.9:80")}}},
		{Node: "n2", Frontends: []proxy.Frontend{}},
		{Node: "n3", Error: "get nodes/n3/proxy/proxy/frontends: the server is currently unable to handle the request"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `node/n1
  default/typo              ClusterIP  10.96.7.7:80/TCP → reject (no endpoints)
  default/web               ClusterIP  10.96.100.10:80/TCP → 10.244.0.5:80/TCP, 10.244.0.6:80/TCP
  default/web               NodePort   0.0.0.0:30080/TCP → 10.244.0.5:80/TCP
  kube-system/kube-dns:dns  ClusterIP  10.96.0.10:53/UDP → 10.244.0.150:53/UDP
  -                         -          10.96.9.9:80/TCP → no backends

node/n2
  no frontends

node/n3
  error: get nodes/n3/proxy/proxy/frontends: the server is currently unable to handle the request
`
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// listFrontends reaches each node's agent at nodes/NAME/proxy/proxy/frontends,
// sorts what they answer, and keeps going past a node that fails.
func TestListFrontendsThroughNodesProxy(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}})
	})
	mux.HandleFunc("GET /api/v1/nodes/n1/proxy/proxy/frontends", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(proxy.FrontendList{Frontends: []proxy.Frontend{webFrontend, typoFrontend}})
	})
	mux.HandleFunc("GET /api/v1/nodes/n2/proxy/proxy/frontends", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "the node's Service proxy has not started yet"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := listFrontends(t.Context(), client, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Node != "n1" || got[1].Node != "n2" {
		t.Fatalf("nodes %+v", got)
	}
	if len(got[0].Frontends) != 2 || got[0].Frontends[0].String() != typoFrontend.String() || got[0].Frontends[1].String() != webFrontend.String() {
		t.Errorf("n1's frontends %v", got[0].Frontends)
	}
	if !strings.Contains(got[1].Error, "has not started yet") || len(got[1].Frontends) != 0 {
		t.Errorf("n2: %+v", got[1])
	}
	// One node only.
	if got, err := listFrontends(t.Context(), client, "n1"); err != nil || len(got) != 1 || len(got[0].Frontends) != 2 {
		t.Errorf("--node n1: %+v, %v", got, err)
	}
	// The JSON output keeps the frontends' fields.
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(frontendsOutput{Nodes: got[:1]}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"node":"n1"`, `"address":"10.96.100.10:80"`, `"backends":["10.244.0.5:80","10.244.0.6:80"]`, `"reject":true`, `"kind":"ClusterIP"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s: %s", want, &b)
		}
	}
}
