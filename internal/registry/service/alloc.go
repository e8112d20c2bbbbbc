package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/storage"
)

// This file allocates and releases a Service's cluster IPs, node ports and
// health check node port, following upstream's storage/alloc.go case by
// case. The IPAddress objects of the cluster IPs and the node port bitmap
// change through the write's storage.Extra, so they commit in the Service's
// own etcd transaction: nothing is taken for a write that fails and nothing
// leaks when the API server dies. Only writes that take or free node ports
// wait for each other (the bitmap is one key); cluster IPs conflict only
// when two writes pick the same address.

// PrepareWrite implements registry.Writer.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, dryRun bool) (storage.Extra, func(error), error) {
	svc, _ := obj.(*corev1.Service)
	prev, _ := old.(*corev1.Service)
	if !touchesAllocations(svc, prev) {
		return storage.Extra{}, func(error) {}, nil
	}
	named := svc
	if named == nil {
		named = prev
	}
	op := &operation{ctx: ctx, alloc: s.alloc, cfg: s.cfg, dryRun: dryRun, ips: s.alloc.IPs.Begin(),
		parent: allocator.ServiceRef(named.Namespace, named.Name)}
	var err error
	switch {
	case prev == nil:
		err = op.create(svc)
	case svc == nil:
		err = op.releaseAll(prev)
	default:
		err = op.update(svc, prev)
	}
	if err != nil && op.ports != nil && !op.ports.Fresh() {
		// Refused from what this server's last write left: another API
		// server may have freed the value since. Read again and retry.
		op.ports.AbortStale()
		op.ips.Settle(err)
		return storage.Extra{}, nil, fmt.Errorf("%w: %w", storage.ErrExtraFailed, err)
	}
	if err != nil || dryRun {
		if op.ports != nil {
			op.ports.Abort()
		}
		op.ips.Settle(err)
		return storage.Extra{}, func(error) {}, err
	}
	extra := op.ips.Extra()
	settlePorts := func(error) {}
	if op.ports != nil {
		portExtra, settle, err := op.ports.Commit()
		if err != nil {
			op.ips.Settle(err)
			return storage.Extra{}, nil, apierrors.NewInternalError(err)
		}
		extra.If = append(extra.If, portExtra.If...)
		extra.Then = append(extra.Then, portExtra.Then...)
		settlePorts = settle
	}
	return extra, func(err error) {
		settlePorts(err)
		op.ips.Settle(err)
	}, nil
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

// ClusterIPs are the cluster IPs a stored Service holds as IPAddresses.
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
	ctx    context.Context
	alloc  allocator.Services
	cfg    *allocator.Config
	dryRun bool
	// parent is the Service the IPAddresses are of.
	parent *networkingv1.ParentReference
	ips    *allocator.IPTxn
	// ports is the node port transaction, begun at the first node port
	// taken or freed.
	ports *allocator.Txn
	// dryPorts are the node ports a dry run pretended to take.
	dryPorts []int
}

// portTxn is the node port transaction, begun on first use.
func (o *operation) portTxn() (*allocator.Txn, error) {
	if o.ports == nil {
		txn, err := o.alloc.Ports.Begin(o.ctx)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("allocate node ports: %w", err))
		}
		o.ports = txn
	}
	return o.ports, nil
}

func parseIP(ip string) netip.Addr {
	a, _ := netip.AddrFromSlice(netutils.ParseIPSloppy(ip))
	return a.Unmap()
}

// ipRefusal tells the allocator's refusals of a chosen address from
// failures to reach etcd.
func ipRefusal(err error) bool {
	var notInRange *allocator.IPNotInRangeError
	return errors.Is(err, allocator.ErrIPAllocated) || errors.Is(err, allocator.ErrMismatchedNetwork) || errors.As(err, &notInRange)
}

func (o *operation) allocIP(svc *corev1.Service, family corev1.IPFamily, ip string) (string, error) {
	rng := o.cfg.Range(family)
	if ip == "" {
		if o.dryRun {
			return rng.Prefix().Addr().String(), nil
		}
		a, err := o.ips.AllocateNext(o.ctx, family, o.parent)
		if err != nil {
			return "", apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %v", err))
		}
		return a.String(), nil
	}
	addr := parseIP(ip)
	var err error
	if o.dryRun {
		err = o.alloc.IPs.InRange(addr)
	} else {
		err = o.ips.Allocate(o.ctx, addr, o.parent)
	}
	if err != nil && !ipRefusal(err) {
		return "", apierrors.NewInternalError(err)
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
	txn, err := o.portTxn()
	if err != nil {
		return err
	}
	if !o.dryRun {
		return txn.AllocatePort(port)
	}
	if txn.HasPort(port) || slices.Contains(o.dryPorts, port) {
		return allocator.ErrPortAllocated
	}
	o.dryPorts = append(o.dryPorts, port)
	return nil
}

func (o *operation) allocNextPort() (int, error) {
	if !o.dryRun {
		txn, err := o.portTxn()
		if err != nil {
			return 0, err
		}
		return txn.AllocateNextPort()
	}
	last := dryRunFirstPort
	if len(o.dryPorts) > 0 {
		last = slices.Max(o.dryPorts)
	}
	o.dryPorts = append(o.dryPorts, last+1)
	return last + 1, nil
}

func (o *operation) releasePorts(ports []int) error {
	if o.dryRun || len(ports) == 0 {
		return nil
	}
	txn, err := o.portTxn()
	if err != nil {
		return err
	}
	for _, port := range ports {
		txn.ReleasePort(port)
	}
	return nil
}

func (o *operation) releaseIPs(ips []string) error {
	if o.dryRun {
		return nil
	}
	for _, ip := range ips {
		if err := o.ips.Release(o.ctx, parseIP(ip), o.parent); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("release cluster IP %s: %w", ip, err))
		}
	}
	return nil
}

func invalid(svc *corev1.Service, errs ...*field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
}

// nodePortError is the 422 of a refused chosen node port; errors that are
// already API errors (etcd unreachable) pass as they are.
func nodePortError(svc *corev1.Service, i int, port int32, err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return invalid(svc, field.Invalid(field.NewPath("spec", "ports").Index(i).Child("nodePort"), port, err.Error()))
}

func nextPortError(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
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
			if _, ok := err.(apierrors.APIStatus); ok {
				return err
			}
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate requested HealthCheck NodePort %v: %v", want, err))
		}
		return nil
	}
	n, err := o.allocNextPort()
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
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
		if err := o.releasePorts(portNumbers(old)); err != nil {
			return err
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
		return o.releasePorts([]int{int(old.Spec.HealthCheckNodePort)})
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
		return o.releaseIPs(old.Spec.ClusterIPs)
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
		return o.releaseIPs(old.Spec.ClusterIPs[1:])
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
	var dropped []int
	for _, port := range had {
		if !slices.Contains(kept, port) {
			dropped = append(dropped, port)
		}
	}
	return o.releasePorts(dropped)
}

// releaseAll frees everything a deleted Service held.
func (o *operation) releaseAll(svc *corev1.Service) error {
	if err := o.releaseIPs(ClusterIPs(svc)); err != nil {
		return err
	}
	return o.releasePorts(NodePorts(svc))
}
