// Package records answers DNS questions about a cluster from an in-memory
// index of its Namespaces, Services and EndpointSlices, as the Kubernetes
// DNS-Based Service Discovery specification (schema 1.1.0) lays them out and
// CoreDNS's kubernetes plugin (with `pods insecure`) answers them: A/AAAA,
// SRV and PTR for Services and their endpoints, CNAME for ExternalName
// Services, pod names, the schema version, and NXDOMAIN apart from NODATA
// with the zone's SOA in the authority section.
//
// The index knows nothing of informers or sockets: callers feed it objects
// (Set*/Delete*) and ask it questions (Lookup), so that the record logic is
// tested answer by answer without a cluster.
package records

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/miekg/dns"
)

// SchemaVersion is the version of the DNS schema served, the TXT of
// dns-version.<zone>.
const SchemaVersion = "1.1.0"

// tolerateUnready is the deprecated annotation the specification still
// counts as making every endpoint ready.
const tolerateUnready = "service.alpha.kubernetes.io/tolerate-unready-endpoints"

// Config shapes the answers.
type Config struct {
	// Zone is the cluster domain, e.g. cluster.local.
	Zone string
	// TTL of every cluster answer (CoreDNS's default is 5 seconds).
	TTL uint32
	// NameServers are the addresses of ns.dns.<zone>, the kube-dns
	// Service's cluster IPs.
	NameServers []netip.Addr
}

// Index holds what the answers are made of. It is safe for concurrent use.
type Index struct {
	zone string // lower case, fully qualified
	ttl  uint32
	ns   []netip.Addr

	mu         sync.RWMutex
	namespaces map[string]bool
	services   map[string]*service           // by namespace/name
	slices     map[string]map[string]*slice  // by service key, then slice name
	sliceOwner map[string]string             // service key by slice key
	clusterIPs map[netip.Addr]string         // service key
	endpointIP map[netip.Addr]map[string]int // service keys, each with the number of slices holding the address

	// modified is the Unix time of the last change, the SOA serial.
	modified atomic.Int64
}

// service is what the records need of a Service.
type service struct {
	name, namespace string
	headless        bool
	clusterIPs      []netip.Addr
	// externalName is set for ExternalName Services.
	externalName string
	ports        []corev1.ServicePort
	// allReady: publishNotReadyAddresses, or the deprecated annotation.
	allReady bool
}

// slice is what the records need of an EndpointSlice.
type slice struct {
	ports     []port
	endpoints []endpoint
}

type port struct {
	name, protocol string
	number         int32
}

type endpoint struct {
	addrs    []netip.Addr
	hostname string
	ready    bool
}

// New returns an empty index.
func New(c Config) *Index {
	ix := &Index{
		zone:       dns.CanonicalName(c.Zone),
		ttl:        c.TTL,
		ns:         c.NameServers,
		namespaces: map[string]bool{},
		services:   map[string]*service{},
		slices:     map[string]map[string]*slice{},
		sliceOwner: map[string]string{},
		clusterIPs: map[netip.Addr]string{},
		endpointIP: map[netip.Addr]map[string]int{},
	}
	ix.touch()
	return ix
}

// Zone is the cluster domain the index answers for, fully qualified.
func (ix *Index) Zone() string { return ix.zone }

func (ix *Index) touch() { ix.modified.Store(time.Now().Unix()) }

func key(namespace, name string) string { return namespace + "/" + name }

// SetNamespace records that a namespace exists.
func (ix *Index) SetNamespace(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.namespaces[name] = true
	ix.touch()
}

// DeleteNamespace forgets a namespace.
func (ix *Index) DeleteNamespace(name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.namespaces, name)
	ix.touch()
}

// SetService adds or replaces a Service.
func (ix *Index) SetService(svc *corev1.Service) {
	s := &service{
		name:      svc.Name,
		namespace: svc.Namespace,
		ports:     svc.Spec.Ports,
		allReady:  svc.Spec.PublishNotReadyAddresses || svc.Annotations[tolerateUnready] == "true",
	}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		s.externalName = svc.Spec.ExternalName
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		s.headless = true
	default:
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 && svc.Spec.ClusterIP != "" {
			ips = []string{svc.Spec.ClusterIP}
		}
		for _, ip := range ips {
			if a, err := netip.ParseAddr(ip); err == nil {
				s.clusterIPs = append(s.clusterIPs, a.Unmap())
			}
		}
	}
	k := key(svc.Namespace, svc.Name)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropClusterIPs(k)
	ix.services[k] = s
	for _, ip := range s.clusterIPs {
		ix.clusterIPs[ip] = k
	}
	ix.touch()
}

// DeleteService forgets a Service.
func (ix *Index) DeleteService(namespace, name string) {
	k := key(namespace, name)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropClusterIPs(k)
	delete(ix.services, k)
	ix.touch()
}

func (ix *Index) dropClusterIPs(k string) {
	if old := ix.services[k]; old != nil {
		for _, ip := range old.clusterIPs {
			if ix.clusterIPs[ip] == k {
				delete(ix.clusterIPs, ip)
			}
		}
	}
}

// SetEndpointSlice adds or replaces an EndpointSlice; slices without a
// kubernetes.io/service-name label, and FQDN slices, belong to no Service's
// records.
func (ix *Index) SetEndpointSlice(es *discoveryv1.EndpointSlice) {
	svcName := es.Labels[discoveryv1.LabelServiceName]
	if svcName == "" || es.AddressType == discoveryv1.AddressTypeFQDN {
		ix.DeleteEndpointSlice(es.Namespace, es.Name)
		return
	}
	s := &slice{}
	for _, p := range es.Ports {
		np := port{number: -1, protocol: string(corev1.ProtocolTCP)}
		if p.Name != nil {
			np.name = *p.Name
		}
		if p.Protocol != nil {
			np.protocol = string(*p.Protocol)
		}
		if p.Port != nil {
			np.number = *p.Port
		}
		s.ports = append(s.ports, np)
	}
	for _, e := range es.Endpoints {
		ne := endpoint{ready: e.Conditions.Ready == nil || *e.Conditions.Ready}
		if e.Hostname != nil {
			ne.hostname = *e.Hostname
		}
		for _, a := range e.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				ne.addrs = append(ne.addrs, ip.Unmap())
			}
		}
		s.endpoints = append(s.endpoints, ne)
	}
	k := key(es.Namespace, svcName)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropSlice(es.Namespace, es.Name)
	if ix.slices[k] == nil {
		ix.slices[k] = map[string]*slice{}
	}
	ix.slices[k][es.Name] = s
	ix.sliceOwner[key(es.Namespace, es.Name)] = k
	for _, e := range s.endpoints {
		for _, ip := range e.addrs {
			if ix.endpointIP[ip] == nil {
				ix.endpointIP[ip] = map[string]int{}
			}
			ix.endpointIP[ip][k]++
		}
	}
	ix.touch()
}

// DeleteEndpointSlice forgets an EndpointSlice.
func (ix *Index) DeleteEndpointSlice(namespace, name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.dropSlice(namespace, name) {
		ix.touch()
	}
}

// dropSlice removes a slice wherever it is filed (its service label may
// have changed) and reports whether there was one.
func (ix *Index) dropSlice(namespace, name string) bool {
	sk := key(namespace, name)
	k, ok := ix.sliceOwner[sk]
	if !ok {
		return false
	}
	delete(ix.sliceOwner, sk)
	for _, e := range ix.slices[k][name].endpoints {
		for _, ip := range e.addrs {
			if ix.endpointIP[ip][k]--; ix.endpointIP[ip][k] <= 0 {
				delete(ix.endpointIP[ip], k)
			}
			if len(ix.endpointIP[ip]) == 0 {
				delete(ix.endpointIP, ip)
			}
		}
	}
	delete(ix.slices[k], name)
	if len(ix.slices[k]) == 0 {
		delete(ix.slices, k)
	}
	return true
}
