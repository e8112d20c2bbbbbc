package dnsbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
)

// zone is the cluster domain both servers serve.
const zone = "cluster.local"

// kind is what sort of Service one is.
type kind int

const (
	// clusterIP Services have one EndpointSlice of two ready endpoints.
	clusterIP kind = iota
	// headless Services have one EndpointSlice of four endpoints:
	// host-0 and host-1 with hostnames, one without, all three ready, and
	// host-3, not ready.
	headless
	// externalName Services point at <name>.example.invalid.
	externalName
)

func kindOf(i int) kind {
	switch {
	case i%100 == 5:
		return externalName
	case i%10 == 0:
		return headless
	default:
		return clusterIP
	}
}

// fixture is the cluster's content: which Service is where, and the
// cluster IPs the API server gave them.
type fixture struct {
	o          Options
	clusterIPs []netip.Addr // by Service, invalid for headless and ExternalName
}

func (f *fixture) namespace(i int) string { return fmt.Sprintf("ns-%d", i%f.o.Namespaces) }
func serviceName(i int) string            { return fmt.Sprintf("svc-%d", i) }

// fqdn is Service i's name.
func (f *fixture) fqdn(i int) string {
	return fmt.Sprintf("%s.%s.svc.%s.", serviceName(i), f.namespace(i), zone)
}

// endpointIP is the address of Service i's endpoint j (j < 4): one of
// 10.244.0.0/14, unique in the cluster.
func endpointIP(i, j int) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 10<<24|244<<16+uint32(i*4+j+1))
	return netip.AddrFrom4(b)
}

// endpointsOf is how many endpoints Service i has, the ready ones first.
func endpointsOf(i int) (ready, total int) {
	switch kindOf(i) {
	case headless:
		return 3, 4
	case clusterIP:
		return 2, 2
	default:
		return 0, 0
	}
}

// load creates the namespaces, the Services and their EndpointSlices with
// o.Workers clients at once.
func load(ctx context.Context, cs kubernetes.Interface, o Options) (*fixture, error) {
	f := &fixture{o: o, clusterIPs: make([]netip.Addr, o.Services)}
	for n := range o.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace(n)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create namespace: %w", err)
		}
	}
	err := benchenv.Parallel(o.Services, o.Workers, func(i int) error {
		created, err := cs.CoreV1().Services(f.namespace(i)).Create(ctx, f.service(i), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create service %s: %w", serviceName(i), err)
		}
		if ip, err := netip.ParseAddr(created.Spec.ClusterIP); err == nil {
			f.clusterIPs[i] = ip
		}
		if es := f.slice(i); es != nil {
			if _, err := cs.DiscoveryV1().EndpointSlices(f.namespace(i)).Create(ctx, es, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create endpointslice of %s: %w", serviceName(i), err)
			}
		}
		return nil
	})
	return f, err
}

func (f *fixture) service(i int) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i), Namespace: f.namespace(i)},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": serviceName(i)},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
			},
		},
	}
	switch kindOf(i) {
	case headless:
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	case externalName:
		svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: serviceName(i) + ".example.invalid"}
	}
	return svc
}

// slice is the EndpointSlice an EndpointSlice controller would keep for
// Service i, or nil for an ExternalName.
func (f *fixture) slice(i int) *discoveryv1.EndpointSlice {
	ready, total := endpointsOf(i)
	if total == 0 {
		return nil
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i) + "-1", Namespace: f.namespace(i), Labels: map[string]string{
			discoveryv1.LabelServiceName: serviceName(i), discoveryv1.LabelManagedBy: "dnsbench"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)},
		},
	}
	for j := range total {
		ep := discoveryv1.Endpoint{
			Addresses: []string{endpointIP(i, j).String()},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(j < ready), Serving: ptr.To(j < ready), Terminating: ptr.To(false)},
			NodeName: ptr.To("node-1"),
		}
		if kindOf(i) == headless && j != 2 {
			ep.Hostname = ptr.To(fmt.Sprintf("host-%d", j))
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

// waitReady waits until the server at addr gives the last headless
// Service's ready endpoints, or stopped reports an error first.
func (f *fixture) waitReady(ctx context.Context, addr string, stopped *exit) error {
	last := f.o.Services - 1
	for kindOf(last) != headless && last > 0 {
		last--
	}
	want, _ := endpointsOf(last)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(f.fqdn(last), dns.TypeA), addr)
		if err == nil && resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == want {
			return nil
		}
		select {
		case <-stopped.done:
			return fmt.Errorf("stopped before answering: %v", stopped.err)
		case <-ctx.Done():
			return fmt.Errorf("no answer for %s: %w", f.fqdn(last), ctx.Err())
		case <-tick.C:
		}
	}
}
