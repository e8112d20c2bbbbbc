package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
	err := writeFrontends(&b, []proxy.NodeFrontends{
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

// -o json keeps the frontends' fields.
func TestFrontendsJSON(t *testing.T) {
	var b bytes.Buffer
	nodes := []proxy.NodeFrontends{{Node: "n1", Frontends: []proxy.Frontend{typoFrontend, webFrontend}}}
	if err := json.NewEncoder(&b).Encode(frontendsOutput{Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"node":"n1"`, `"address":"10.96.100.10:80"`, `"backends":["10.244.0.5:80","10.244.0.6:80"]`, `"reject":true`, `"kind":"ClusterIP"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("JSON lacks %s: %s", want, &b)
		}
	}
}
