package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/nftrace"
)

func TestTraceTarget(t *testing.T) {
	client := fake.NewClientset(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
		}},
	})
	ctx := context.Background()
	var req nftrace.Request
	var out traceOutput
	if err := traceTarget(ctx, client, "kube-system", "svc/kube-dns:dns-tcp", &req, &out); err != nil {
		t.Fatal(err)
	}
	if req.Host != "10.96.0.10" || req.Port != 53 || req.Protocol != "TCP" || out.Service.Port != "dns-tcp 53/TCP" {
		t.Errorf("svc/kube-dns:dns-tcp: %+v %+v", req, out.Service)
	}
	// Two ports: a name or number is needed.
	err := traceTarget(ctx, client, "kube-system", "svc/kube-dns", &nftrace.Request{}, &traceOutput{})
	if err == nil || !strings.Contains(err.Error(), "(it has: dns 53, dns-tcp 53)") {
		t.Errorf("svc/kube-dns: %v", err)
	}
	req = nftrace.Request{}
	if err := traceTarget(ctx, client, "default", "web.default.svc.cluster.local:80", &req, &out); err != nil || req.Host != "web.default.svc.cluster.local" || req.Port != 80 {
		t.Errorf("a DNS name: %+v, %v", req, err)
	}
	if err := traceTarget(ctx, client, "default", "web", &req, &out); err == nil {
		t.Error("a name without port: no error")
	}
}

// The summary names the step that rejected the packet by its number in
// the list, after the DNS answer's and the probe's lines.
func TestWriteTrace(t *testing.T) {
	out := &traceOutput{From: "default/client", To: "web:80", Result: &nftrace.Result{
		Node: "n1", Source: "10.244.0.6:40000", Protocol: "TCP", Destination: "10.96.100.10:80",
		DNS: &nftrace.DNSAnswer{Name: "web", Query: "web.default.svc.cluster.local.", Server: "10.96.0.10", Addresses: []string{"10.96.100.10"}},
		Steps: []nftrace.Step{
			{Family: "ip", Table: "svcnet", Chain: "endpoints-check", Type: nftrace.TypeRule, Handle: 9,
				Rule: "ip daddr . meta l4proto . th dport vmap @no-endpoint-services", Verdict: "goto reject-chain",
				Packet: "10.244.0.6:40000 → 10.96.100.10:80 tcp syn", In: "svcnet0"},
			{Family: "ip", Table: "svcnet", Chain: "reject-chain", Type: nftrace.TypeRule, Handle: 11, Rule: "reject with tcp reset", Verdict: "drop"},
		},
		Dropped: 2,
		Answer:  nftrace.Answer{Outcome: nftrace.Refused, Detail: "a TCP reset came back"},
	}}
	var b strings.Builder
	if err := writeTrace(&b, out); err != nil {
		t.Fatal(err)
	}
	want := `Trace of tcp from pod default/client on node n1 to web:80
  1. DNS web → 10.96.100.10 (web.default.svc.cluster.local, answered by 10.96.0.10)
  2. probe 10.244.0.6:40000 → 10.96.100.10:80 from the pod's network namespace
  3. ip svcnet endpoints-check: ip daddr . meta l4proto . th dport vmap @no-endpoint-services (verdict goto reject-chain)
      packet 10.244.0.6:40000 → 10.96.100.10:80 tcp syn in svcnet0
  4. ip svcnet reject-chain: reject with tcp reset (verdict drop)
  5. rejected at step 4: ip svcnet reject-chain: reject with tcp reset (verdict drop)
  6. answer: refused (a TCP reset came back)
`
	if b.String() != want {
		t.Errorf("writeTrace:\n%s\nwant:\n%s", b.String(), want)
	}
}
