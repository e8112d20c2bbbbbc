// Package publish puts a node's DNS server behind the kube-dns Service.
// The Service (kube-system/kube-dns, the cluster DNS address, ports dns
// 53/UDP, dns-tcp 53/TCP and metrics 9153/TCP as kubeadm's) has no
// selector: each node agent creates it when the cluster has none and keeps
// one EndpointSlice of its own, kube-dns-<node>, listing its DNS address.
// The slice is owned by the Node, so that the garbage collector removes it
// with the Node, carries a managed-by label of ours, so that no
// EndpointSlice controller touches it, and is deleted when the agent stops.
package publish

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Names of the Service and of the objects' labels.
const (
	ServiceName = "kube-dns"
	// ManagedBy is the endpointslice.kubernetes.io/managed-by value of the
	// node agents' slices.
	ManagedBy = "node-dns.svcnet.io"
	// DNSPort and MetricsPort are where each node's server listens.
	DNSPort     = 53
	MetricsPort = 9153
)

// Config says what to publish.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// ServiceIP is the kube-dns Service's cluster IP (10.96.0.10).
	ServiceIP string
	// Address is this node's DNS server address.
	Address netip.Addr
	// Interval is how often the objects are checked (default 10s).
	Interval time.Duration
}

// Run keeps the Service and this node's slice until ctx ends, then
// removes the slice.
func Run(ctx context.Context, c Config) {
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		if err := Ensure(ctx, c); err != nil && ctx.Err() == nil {
			slog.Warn("publish the node's DNS address in kube-dns", "err", err)
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := c.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Delete(stop, SliceName(c.NodeName), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				slog.Warn("remove the node's DNS address from kube-dns", "err", err)
			}
			return
		case <-t.C:
		}
	}
}

// SliceName is the name of a node's slice of kube-dns.
func SliceName(node string) string { return ServiceName + "-" + node }

// Ensure creates the Service when missing, and creates or corrects this
// node's slice.
func Ensure(ctx context.Context, c Config) error {
	if err := ensureService(ctx, c); err != nil {
		return err
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read node %s: %w", c.NodeName, err)
	}
	want := desiredSlice(c, node)
	slices := c.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := slices.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create EndpointSlice %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read EndpointSlice %s: %w", want.Name, err)
	}
	if apiequality.Semantic.DeepEqual(cur.Labels, want.Labels) && apiequality.Semantic.DeepEqual(cur.OwnerReferences, want.OwnerReferences) &&
		cur.AddressType == want.AddressType && apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) &&
		apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) {
		return nil
	}
	cur.Labels, cur.OwnerReferences = want.Labels, want.OwnerReferences
	cur.AddressType, cur.Endpoints, cur.Ports = want.AddressType, want.Endpoints, want.Ports
	if _, err := slices.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update EndpointSlice %s: %w", want.Name, err)
	}
	return nil
}

func ensureService(ctx context.Context, c Config) error {
	services := c.Client.CoreV1().Services(metav1.NamespaceSystem)
	_, err := services.Get(ctx, ServiceName, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read service %s: %w", ServiceName, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: ServiceName, Namespace: metav1.NamespaceSystem,
			Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "KubeDNS"},
			Annotations: map[string]string{"prometheus.io/port": fmt.Sprint(MetricsPort), "prometheus.io/scrape": "true"},
		},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: c.ServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: DNSPort, TargetPort: intstr.FromInt32(DNSPort)},
				{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: DNSPort, TargetPort: intstr.FromInt32(DNSPort)},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: MetricsPort, TargetPort: intstr.FromInt32(MetricsPort)},
			},
		},
	}
	if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s: %w", ServiceName, err)
	}
	return nil
}

func desiredSlice(c Config, node *corev1.Node) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if c.Address.Is6() {
		family = discoveryv1.AddressTypeIPv6
	}
	port := func(name string, proto corev1.Protocol, n int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(n)}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SliceName(c.NodeName),
			Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: ServiceName,
				discoveryv1.LabelManagedBy:   ManagedBy,
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
		},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{c.Address.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(c.NodeName),
		}},
		Ports: []discoveryv1.EndpointPort{
			port("dns", corev1.ProtocolUDP, DNSPort),
			port("dns-tcp", corev1.ProtocolTCP, DNSPort),
			port("metrics", corev1.ProtocolTCP, MetricsPort),
		},
	}
}
