package controller

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/svcnet/svcnet/internal/ingress/routes"
)

// Listener names of the table the controller builds: both serve the same
// hosts, the second behind TLS.
const (
	HTTP  = "http"
	HTTPS = "https"
)

// world is what a table is built from.
type world struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	secrets  corelisters.SecretLister
	certs    *certCache
	// defaultCert is served to names no Secret covers.
	defaultCert *tls.Certificate
}

// build turns the served Ingresses into a table. The oldest Ingress wins
// where two claim the same host, path and type, or both set a
// defaultBackend (ingress-nginx's rule); problems are per Ingress, for
// events.
func (w *world) build(ings []*networkingv1.Ingress) (*routes.Table, map[*networkingv1.Ingress][]string) {
	ings = slices.Clone(ings)
	slices.SortStableFunc(ings, func(a, b *networkingv1.Ingress) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	problems := map[*networkingv1.Ingress][]string{}
	l := &routes.Listener{DefaultCertificate: w.defaultCert}
	hosts := map[string]*routes.VirtualHost{}
	for _, ing := range ings {
		src := routes.Source{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name}
		backend := func(b *networkingv1.IngressBackend) *routes.Backend {
			be, err := w.backend(ing.Namespace, b)
			if err != nil {
				problems[ing] = append(problems[ing], err.Error())
			}
			return be
		}
		if b := ing.Spec.DefaultBackend; b != nil && l.Default == nil {
			l.Default = &routes.Route{Source: src, Backends: []*routes.Backend{backend(b)}}
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			host := strings.ToLower(rule.Host)
			vh := hosts[host]
			if vh == nil {
				vh = &routes.VirtualHost{Hostname: host}
				hosts[host] = vh
				l.Hosts = append(l.Hosts, vh)
			}
			for _, p := range rule.HTTP.Paths {
				vh.Routes = append(vh.Routes, &routes.Route{
					Source:   src,
					Matches:  []routes.Match{{Path: pathMatch(p)}},
					Backends: []*routes.Backend{backend(&p.Backend)},
				})
			}
		}
		for _, t := range ing.Spec.TLS {
			c, err := w.certificate(ing.Namespace, t.SecretName)
			if err != nil {
				problems[ing] = append(problems[ing], err.Error())
				continue
			}
			names := t.Hosts
			if len(names) == 0 && c.Leaf != nil {
				names = c.Leaf.DNSNames
			}
			l.Certificates = append(l.Certificates, routes.Certificate{Hosts: names, Cert: c})
		}
	}
	for _, vh := range l.Hosts {
		routes.SortIngressPaths(vh.Routes)
	}
	w.certs.sweep()
	return &routes.Table{Listeners: map[string]*routes.Listener{HTTP: l, HTTPS: l}}, problems
}

// pathMatch is an Ingress path as a match: ImplementationSpecific is
// svcnet's Prefix, and an empty path is "/".
func pathMatch(p networkingv1.HTTPIngressPath) routes.PathMatch {
	v := p.Path
	if v == "" {
		v = "/"
	}
	if p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
		return routes.PathMatch{Type: routes.PathExact, Value: v}
	}
	return routes.PathMatch{Type: routes.PathPrefix, Value: v}
}

// backend resolves an Ingress backend to the ready endpoints of its
// Service port (by number or name), at the port the EndpointSlices give
// for it (the Service's targetPort, named ports resolved per pod). A
// backend that cannot be resolved has no endpoints and answers 503.
func (w *world) backend(ns string, b *networkingv1.IngressBackend) (*routes.Backend, error) {
	if b.Service == nil {
		be := &routes.Backend{Namespace: ns, Weight: 1}
		if b.Resource != nil {
			be.Service = b.Resource.Kind + "/" + b.Resource.Name
		}
		return be, fmt.Errorf("resource backend %s is not supported", be.Service)
	}
	be := &routes.Backend{Namespace: ns, Service: b.Service.Name, Weight: 1}
	svc, err := w.services.Services(ns).Get(b.Service.Name)
	if err != nil {
		return be, fmt.Errorf("service %s/%s: %w", ns, b.Service.Name, err)
	}
	var sp *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != "" {
			continue
		}
		if (b.Service.Port.Name != "" && p.Name == b.Service.Port.Name) || (b.Service.Port.Name == "" && p.Port == b.Service.Port.Number) {
			sp = &svc.Spec.Ports[i]
			break
		}
	}
	if sp == nil {
		port := b.Service.Port.Name
		if port == "" {
			port = fmt.Sprint(b.Service.Port.Number)
		}
		return be, fmt.Errorf("service %s/%s has no TCP port %s", ns, svc.Name, port)
	}
	be.Endpoints = ReadyEndpoints(w.slices, svc, sp)
	return be, nil
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// certificate is the kubernetes.io/tls Secret's key pair.
func (w *world) certificate(ns, name string) (*tls.Certificate, error) {
	s, err := w.secrets.Secrets(ns).Get(name)
	if err != nil {
		return nil, fmt.Errorf("TLS secret %s/%s: %w", ns, name, err)
	}
	return w.certs.get(s)
}

// certCache keeps parsed key pairs by Secret UID and resourceVersion, so
// a rebuild does not parse every certificate again; sweep forgets those a
// build did not ask for. Only the builder's goroutine uses it.
type certCache struct {
	m map[string]*cachedCert
}

type cachedCert struct {
	rv   string
	cert *tls.Certificate
	err  error
	used bool
}

func (c *certCache) get(s *corev1.Secret) (*tls.Certificate, error) {
	key := string(s.UID)
	e, ok := c.m[key]
	if !ok || e.rv != s.ResourceVersion {
		cert, err := parseKeyPair(s)
		e = &cachedCert{rv: s.ResourceVersion, cert: cert, err: err}
		if c.m == nil {
			c.m = map[string]*cachedCert{}
		}
		c.m[key] = e
	}
	e.used = true
	return e.cert, e.err
}

func (c *certCache) sweep() {
	for k, e := range c.m {
		if !e.used {
			delete(c.m, k)
		}
		e.used = false
	}
}

func parseKeyPair(s *corev1.Secret) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("TLS secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("TLS secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return &c, nil
}
