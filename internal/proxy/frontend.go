package proxy

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// FrontendKind is what put a frontend in the data plane.
type FrontendKind string

// The kinds of frontend, after the Service fields that make them.
const (
	KindClusterIP    FrontendKind = "ClusterIP"
	KindExternalIP   FrontendKind = "ExternalIP"
	KindLoadBalancer FrontendKind = "LoadBalancer"
	KindNodePort     FrontendKind = "NodePort"
)

// Frontend is one destination a node's proxy captures, as read back from
// its live data plane: the Service port it serves and where its
// connections go.
type Frontend struct {
	// Namespace and Name are the Service's, PortName its port's name (""
	// for a single unnamed port); all empty when the data plane does not
	// say.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	PortName  string `json:"portName,omitempty"`
	// Kind is empty when the data plane does not say.
	Kind FrontendKind `json:"kind,omitempty"`
	// Address is the captured address and port; a NodePort's address is
	// the unspecified one of its family: every address of the node but
	// loopback.
	Address  netip.AddrPort  `json:"address"`
	Protocol corev1.Protocol `json:"protocol"`
	// Backends are the endpoints new connections go to, in the data
	// plane's order (same protocol as the frontend).
	Backends []netip.AddrPort `json:"backends,omitempty"`
	// Reject is set when the Service has no endpoints: connections are
	// refused (TCP reset, ICMP port unreachable).
	Reject bool `json:"reject,omitempty"`
	// Drop is set when connections are dropped: a Local traffic policy
	// with endpoints on other nodes only.
	Drop bool `json:"drop,omitempty"`
}

// Service is namespace/name, or "" when unknown.
func (f Frontend) Service() string {
	if f.Name == "" {
		return ""
	}
	return f.Namespace + "/" + f.Name
}

// String is seed 003's line, `10.96.0.10:53/UDP → 10.244.0.150:53/UDP`,
// with the backends comma-separated.
func (f Frontend) String() string {
	var to string
	switch {
	case f.Reject:
		to = "reject (no endpoints)"
	case f.Drop:
		to = "drop (no local endpoints)"
	case len(f.Backends) == 0:
		to = "no backends"
	default:
		list := make([]string, len(f.Backends))
		for i, b := range f.Backends {
			list[i] = fmt.Sprintf("%s/%s", b, f.Protocol)
		}
		to = strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s/%s → %s", f.Address, f.Protocol, to)
}

var kindOrder = []FrontendKind{KindClusterIP, KindExternalIP, KindLoadBalancer, KindNodePort}

// SortFrontends orders frontends by Service, port name, kind (cluster IP
// first), address and protocol.
func SortFrontends(list []Frontend) {
	slices.SortFunc(list, func(a, b Frontend) int {
		return cmp.Or(
			strings.Compare(a.Namespace, b.Namespace),
			strings.Compare(a.Name, b.Name),
			strings.Compare(a.PortName, b.PortName),
			cmp.Compare(slices.Index(kindOrder, a.Kind), slices.Index(kindOrder, b.Kind)),
			a.Address.Compare(b.Address),
			strings.Compare(string(a.Protocol), string(b.Protocol)),
		)
	})
}

// FrontendList is a node's frontends, as its agent serves them, and when
// its proxy last wrote its data plane.
type FrontendList struct {
	Frontends []Frontend `json:"frontends"`
	// LastSync is the proxy's last successful sync; zero before the first.
	LastSync time.Time `json:"lastSync,omitzero"`
}

// FrontendReader is a backend that reads its frontends back from the data
// plane it keeps: those of the Service named by service (namespace/name),
// or every one when service is empty.
type FrontendReader interface {
	Frontends(ctx context.Context, service string) ([]Frontend, error)
}

// FrontendLister lists a node's frontends with its proxy's last sync, as
// the node's agent serves them.
type FrontendLister interface {
	ListFrontends(ctx context.Context, service string) (FrontendList, error)
}
