package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/storage"
)

// This file allocates and releases a Service's cluster IPs, node ports and
// health check node port, following upstream's storage/alloc.go case by
// case. The bitmap changes are returned as the write's storage.Extra, so
// they commit in the Service's own etcd transaction: nothing is taken for a
// write that fails and nothing leaks when the API server dies.

// PrepareWrite implements registry.Writer.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, dryRun bool) (storage.Extra, func(error), error) {
	svc, _ := obj.(*corev1.Service)
	prev, _ := old.(*corev1.Service)
	if !touchesAllocations(svc, prev) {
		return storage.Extra{}, func(error) {}, nil
	}
	txn, err := s.store.Begin(ctx)
	if err != nil {
		return storage.Extra{}, nil, apierrors.NewInternalError(fmt.Errorf("allocate service addresses: %w", err))
	}
	op := &operation{txn: txn, cfg: s.cfg, dryRun: dryRun}
	switch {
	case prev == nil:
		err = op.create(svc)
	case svc == nil:
		op.releaseAll(prev)
	default:
		err = op.update(svc, prev)
	}
	if err != nil && !txn.Fresh() {
		// Refused from what this server's last write left: another API
		// server may have freed the value since. Read again and retry.
		txn.AbortStale()
		return storage.Extra{}, nil, fmt.Errorf("%w: %w", storage.ErrExtraFailed, err)
	}
	if err != nil || dryRun {
		txn.Abort()
		return storage.Extra{}, func(error) {}, err
	}
	extra, settle, err := txn.Commit()
	if err != nil {
		return storage.Extra{}, nil, apierrors.NewInternalError(err)
	}
	return extra, settle, nil
}

// touchesAllocations is false for writes that can neither take nor free
// anything (metadata and status changes), which skip the bitmaps.
func touchesAllocations(svc, old *corev1.Service) bool {
	switch {
	case old == nil:
		return needsClusterIP(svc) && !isHeadless(svc) || needsNodePort(svc)
	case svc == nil:
		return len(ClusterIPs(old)) > 0 || len(NodePorts(old)) > 0
	}
	if svc.Spec.Type != old.Spec.Type || !sameClusterIPs(svc, old) || !sameIPFamilies(svc, old) ||
		svc.Spec.HealthCheckNodePort != old.Spec.HealthCheckNodePort || needsHealthCheck(svc) != needsHealthCheck(old) {
		return true
	}
	if len(svc.Spec.Ports) != len(old.Spec.Ports) {
		return true
	}
	for i, p := range svc.Spec.Ports {
		if p.NodePort != old.Spec.Ports[i].NodePort || p.NodePort == 0 && shouldAllocateNodePorts(svc) {
			return true
		}
	}
	return false
}

// ClusterIPs are the cluster IPs a stored Service holds in the bitmaps.
func ClusterIPs(svc *corev1.Service) []string {
	if !needsClusterIP(svc) || isHeadless(svc) {
		return nil
	}
	return svc.Spec.ClusterIPs
}

// NodePorts are the node ports a stored Service holds in the bitmap: the
// node ports of a NodePort or LoadBalancer Service's ports and its health
// check node port. (Upstream also releases node ports an ExternalName
// Service merely names; they were never allocated to it, so here they are
// not counted.)
func NodePorts(svc *corev1.Service) []int {
	ports := portNumbers(svc)
	if needsHealthCheck(svc) && svc.Spec.HealthCheckNodePort != 0 {
		ports = append(ports, int(svc.Spec.HealthCheckNodePort))
	}
	return ports
}

// portNumbers are the node ports of a NodePort or LoadBalancer Service's
// ports.
func portNumbers(svc *corev1.Service) []int {
	if !needsNodePort(svc) {
		return nil
	}
	var out []int
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 {
			out = append(out, int(p.NodePort))
		}
	}
	return out
}

// dryRunFirstPort precedes the made-up node ports a dry run answers with.
const dryRunFirstPort = 32768

// operation is one write's allocations. A dry run takes nothing and, as
// upstream's, answers with made-up values: the range's network address for
// a cluster IP, 32769 and up for node ports; a chosen value is only checked
// against its range (IPs) or the taken ones (ports).
type operation struct {
	txn    *allocator.Txn
	cfg    *allocator.Config
	dryRun bool
	// dryPorts are the node ports a dry run pretended to take.
	dryPorts []int
}

func parseIP(ip string) netip.Addr {
	a, _ := netip.AddrFromSlice(netutils.ParseIPSloppy(ip))
	return a.Unmap()
}

func (o *operation) allocIP(svc *corev1.Service, family corev1.IPFamily, ip string) (string, error) {
	rng := o.cfg.Range(family)
	if ip == "" {
		if o.dryRun {
			return rng.Prefix().Addr().String(), nil
		}
		a, err := o.txn.AllocateNextIP(family)
		if err != nil {
			return "", apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %v", err))
		}
		return a.String(), nil
	}
	addr := parseIP(ip)
	var err error
	if o.dryRun {
		if _, err = rng.Index(addr); err != nil {
			err = &allocator.IPNotInRangeError{IP: addr, Range: rng.String()}
		}
	} else {
		err = o.txn.AllocateIP(addr)
	}
	if err != nil {
		return "", invalid(svc, field.Invalid(field.NewPath("spec", "clusterIPs"), svc.Spec.ClusterIPs,
			fmt.Sprintf("failed to allocate IP %v: %v", ip, err)))
	}
	return ip, nil
}

// allocClusterIPs gives a Service one cluster IP per IP family, the ones it
// names or free ones.
func (o *operation) allocClusterIPs(svc *corev1.Service) error {
	spec := &svc.Spec
	if !needsClusterIP(svc) || isHeadless(svc) {
		return nil
	}
	for len(spec.ClusterIPs) < len(spec.IPFamilies) {
		spec.ClusterIPs = append(spec.ClusterIPs, "")
	}
	for i, family := range spec.IPFamilies {
		ip, err := o.allocIP(svc, family, spec.ClusterIPs[i])
		if err != nil {
			return err
		}
		spec.ClusterIPs[i] = ip
	}
	if len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	return nil
}

func (o *operation) allocPort(port int) error {
	if !o.dryRun {
		return o.txn.AllocatePort(port)
	}
	if o.txn.HasPort(port) || slices.Contains(o.dryPorts, port) {
		return allocator.ErrPortAllocated
	}
	o.dryPorts = append(o.dryPorts, port)
	return nil
}

func (o *operation) allocNextPort() (int, error) {
	if !o.dryRun {
		return o.txn.AllocateNextPort()
	}
	last := dryRunFirstPort
	if len(o.dryPorts) > 0 {
		last = slices.Max(o.dryPorts)
	}
	o.dryPorts = append(o.dryPorts, last+1)
	return last + 1, nil
}

func (o *operation) releasePort(port int) {
	if !o.dryRun {
		o.txn.ReleasePort(port)
	}
}

func (o *operation) releaseIP(ip string) {
	if !o.dryRun {
		o.txn.ReleaseIP(parseIP(ip))
	}
}

func invalid(svc *corev1.Service, errs ...*field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
}

func nodePortError(svc *corev1.Service, i int, port int32, err error) error {
	return invalid(svc, field.Invalid(field.NewPath("spec", "ports").Index(i).Child("nodePort"), port, err.Error()))
}

func nextPortError(err error) error {
	return apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %v", err))
}

func (o *operation) create(svc *corev1.Service) error {
	if err := o.allocClusterIPs(svc); err != nil {
		return err
	}
	if needsNodePort(svc) {
		if err := o.initNodePorts(svc); err != nil {
			return err
		}
	}
	if needsHealthCheck(svc) {
		return o.allocHealthCheck(svc)
	}
	return nil
}

// initNodePorts gives every port of a new Service a node port; ports with
// the same port number (TCP and UDP 53) share one.
func (o *operation) initNodePorts(svc *corev1.Service) error {
	ports := svc.Spec.Ports
	byPort := map[int32]int32{}
	for i := range ports {
		p := &ports[i]
		if p.NodePort == 0 && !shouldAllocateNodePorts(svc) {
			continue // only chosen node ports are honoured
		}
		shared := byPort[p.Port]
		switch {
		case shared == 0:
			if want := requestedNodePort(p.Port, ports); want != 0 {
				if err := o.allocPort(int(want)); err != nil {
					return nodePortError(svc, i, want, err)
				}
				p.NodePort = want
			} else {
				n, err := o.allocNextPort()
				if err != nil {
					return nextPortError(err)
				}
				p.NodePort = int32(n)
			}
			byPort[p.Port] = p.NodePort
		case p.NodePort == 0:
			p.NodePort = shared
		case p.NodePort != shared:
			if err := o.allocPort(int(p.NodePort)); err != nil {
				return nodePortError(svc, i, p.NodePort, err)
			}
		}
	}
	return nil
}

// requestedNodePort is the first node port chosen for a port number.
func requestedNodePort(port int32, ports []corev1.ServicePort) int32 {
	for _, p := range ports {
		if p.Port == port && p.NodePort != 0 {
			return p.NodePort
		}
	}
	return 0
}

func (o *operation) allocHealthCheck(svc *corev1.Service) error {
	if want := svc.Spec.HealthCheckNodePort; want != 0 {
		if err := o.allocPort(int(want)); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate requested HealthCheck NodePort %v: %v", want, err))
		}
		return nil
	}
	n, err := o.allocNextPort()
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate a HealthCheck NodePort %v: %v", n, err))
	}
	svc.Spec.HealthCheckNodePort = int32(n)
	return nil
}

func (o *operation) update(svc, old *corev1.Service) error {
	if err := o.updateClusterIPs(svc, old); err != nil {
		return err
	}
	if needsNodePort(old) && !needsNodePort(svc) {
		for _, port := range portNumbers(old) {
			o.releasePort(port)
		}
	}
	if needsNodePort(svc) {
		if err := o.updateNodePorts(svc, old); err != nil {
			return err
		}
	}
	switch {
	case !needsHealthCheck(old) && needsHealthCheck(svc):
		return o.allocHealthCheck(svc)
	case needsHealthCheck(old) && !needsHealthCheck(svc):
		o.releasePort(int(old.Spec.HealthCheckNodePort))
	}
	return nil
}

// updateClusterIPs handles the type changes to and from ExternalName and
// the dual-stack upgrade (a secondary IP added) and downgrade.
func (o *operation) updateClusterIPs(svc, old *corev1.Service) error {
	spec := &svc.Spec
	switch {
	case matchingPreferDualStack(svc, old):
	case !needsClusterIP(old) && needsClusterIP(svc):
		return o.allocClusterIPs(svc)
	case isHeadless(old):
	case needsClusterIP(old) && !needsClusterIP(svc):
		for _, ip := range old.Spec.ClusterIPs {
			o.releaseIP(ip)
		}
	case len(old.Spec.IPFamilies) == 1 && len(spec.IPFamilies) == 2:
		if len(spec.ClusterIPs) < 2 {
			spec.ClusterIPs = append(spec.ClusterIPs, "")
		}
		ip, err := o.allocIP(svc, spec.IPFamilies[1], spec.ClusterIPs[1])
		if err != nil {
			return err
		}
		spec.ClusterIPs[1] = ip
	case len(old.Spec.IPFamilies) == 2 && len(spec.IPFamilies) == 1 && len(old.Spec.ClusterIPs) == 2:
		o.releaseIP(old.Spec.ClusterIPs[1])
	}
	return nil
}

// updateNodePorts takes the node ports an update adds (chosen or free) and
// frees the ones it drops.
func (o *operation) updateNodePorts(svc, old *corev1.Service) error {
	had := portNumbers(old)
	taken := map[int32]bool{}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		switch {
		case p.NodePort == 0 && !shouldAllocateNodePorts(svc):
		case p.NodePort == 0:
			n, err := o.allocNextPort()
			if err != nil {
				return nextPortError(err)
			}
			p.NodePort = int32(n)
		case !slices.Contains(had, int(p.NodePort)) && !taken[p.NodePort]:
			if err := o.allocPort(int(p.NodePort)); err != nil {
				return nodePortError(svc, i, p.NodePort, err)
			}
			taken[p.NodePort] = true
		}
	}
	kept := portNumbers(svc)
	for _, port := range had {
		if !slices.Contains(kept, port) {
			o.releasePort(port)
		}
	}
	return nil
}

// releaseAll frees everything a deleted Service held.
func (o *operation) releaseAll(svc *corev1.Service) {
	for _, ip := range ClusterIPs(svc) {
		o.releaseIP(ip)
	}
	for _, port := range NodePorts(svc) {
		o.releasePort(port)
	}
}
