// Package controlplane holds the API server's own controllers, after
// upstream's pkg/controlplane/controller and the Service allocation repair
// controllers: the repair of the IPAddresses and the node port bitmap from
// the stored Services, and the `kubernetes` Service with the Endpoints and
// EndpointSlice that list the live API servers.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/storage"
)

// Event sources of the repair, as upstream names its controllers.
const (
	ipRepairComponent   = "ipallocator-repair-controller"
	portRepairComponent = "portallocator-repair-controller"
)

// repairAttempts bounds the rebuilds that lose the race with Service
// writes of other API servers.
const repairAttempts = 20

// Repair checks the allocations against the stored Services, as
// upstream's RepairIPAddress and port allocator repair controllers do.
// Because every Service write commits with its IPAddresses and node port
// bitmap change, they only disagree with the Services when the ranges were
// changed, data was lost or edited behind the API server, or the cluster
// was upgraded from the bitmap allocator; Repair then creates the missing
// IPAddresses, deletes the ones it owns that no Service holds, rewrites
// the node port bitmap, and logs and records a Warning event for every
// finding.
type Repair struct {
	Store  *storage.Store
	Alloc  allocator.Services
	Events corev1client.EventsGetter
}

// problem is one finding about an object, reported once the repair of it
// is committed.
type problem struct {
	obj                                corev1.ObjectReference
	component, action, reason, message string
}

func serviceProblem(svc *corev1.Service, component, action, reason, message string) problem {
	return problem{corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace,
		Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion}, component, action, reason, message}
}

func ipAddressProblem(ipa *networkingv1.IPAddress, reason, message string) problem {
	return problem{corev1.ObjectReference{Kind: "IPAddress", APIVersion: "networking.k8s.io/v1", Name: ipa.Name,
		UID: ipa.UID, ResourceVersion: ipa.ResourceVersion}, ipRepairComponent, "IPAddressAllocation", reason, message}
}

// RunOnce repairs until a pass commits without racing other writers.
func (r *Repair) RunOnce(ctx context.Context) error {
	for range repairAttempts {
		problems, err := r.repair(ctx)
		if errors.Is(err, allocator.ErrRebuildConflict) {
			continue
		}
		if err != nil {
			return fmt.Errorf("repair service allocations: %w", err)
		}
		for _, p := range problems {
			r.report(ctx, p)
		}
		return nil
	}
	return fmt.Errorf("repair service allocations: %w", allocator.ErrRebuildConflict)
}

// Run repairs every interval until ctx ends.
func (r *Repair) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
				slog.Error("service allocation repair failed", "err", err)
			}
		}
	}
}

// repair checks the Services, the IPAddresses and the node port bitmap as
// of one revision; ErrRebuildConflict when a fix found them changed since.
func (r *Repair) repair(ctx context.Context) ([]problem, error) {
	list, err := r.Store.List(ctx, servicesPrefix, storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	addrs, err := r.Store.List(ctx, allocator.IPAddressesPrefix, storage.ListOptions{Revision: list.Revision})
	if err != nil {
		return nil, fmt.Errorf("list IP addresses: %w", err)
	}
	svcs := make([]*corev1.Service, len(list.Items))
	for i, obj := range list.Items {
		svcs[i] = obj.(*corev1.Service)
	}
	ips := &ipRepair{alloc: r.Alloc.IPs, client: r.Store.Client, byName: map[string]*networkingv1.IPAddress{}}
	for _, obj := range addrs.Items {
		if ipa, ok := obj.(*networkingv1.IPAddress); ok {
			ips.byName[ipa.Name] = ipa
		}
	}
	if err := ips.run(ctx, svcs); err != nil {
		return nil, err
	}
	problems, err := r.repairPorts(ctx, svcs, list.Revision)
	if err != nil {
		return nil, err
	}
	return append(ips.problems, problems...), nil
}

// repairPorts rebuilds the node port bitmap.
func (r *Repair) repairPorts(ctx context.Context, svcs []*corev1.Service, rev int64) ([]problem, error) {
	rb, err := r.Alloc.Ports.StartRebuild(ctx, rev)
	if err != nil {
		return nil, err
	}
	var problems []problem
	for _, svc := range svcs {
		for _, port := range service.NodePorts(svc) {
			if p := checkPort(rb, r.Alloc.Config(), svc, port); p != nil {
				problems = append(problems, *p)
			}
		}
	}
	wrote, err := rb.Commit(ctx)
	if err != nil {
		return nil, err
	}
	for _, port := range rb.Leaked() {
		slog.Warn("released a node port no Service holds", "port", port)
	}
	if wrote {
		slog.Info("rebuilt the node port bitmap", "services", len(svcs))
	}
	return problems, nil
}

// ipRepair is one pass over the Services' cluster IPs and the IPAddresses.
type ipRepair struct {
	alloc  *allocator.Addresses
	client *clientv3.Client
	// byName are the IPAddresses as listed, updated by the pass's fixes.
	byName   map[string]*networkingv1.IPAddress
	problems []problem
}

// servicesPrefix is the etcd prefix of the Services.
const servicesPrefix = "/registry/services/"

func serviceKey(namespace, name string) string { return servicesPrefix + namespace + "/" + name }

func revisionOf(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// fix commits op if the IPAddress of name (at ipRev; 0: absent) and, when
// svcKey is set, the Service (at svcRev; 0: absent) are as listed.
func (p *ipRepair) fix(ctx context.Context, svcKey string, svcRev int64, name string, ipRev int64, op clientv3.Op) error {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(allocator.IPAddressesPrefix+name), "=", ipRev)}
	if svcKey != "" {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(svcKey), "=", svcRev))
	}
	resp, err := p.client.Txn(ctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return fmt.Errorf("repair IPAddress %s: %w", name, err)
	}
	if !resp.Succeeded {
		return allocator.ErrRebuildConflict
	}
	return nil
}

// allocate creates (or replaces) the IPAddress of a Service's address.
func (p *ipRepair) allocate(ctx context.Context, svc *corev1.Service, ip netip.Addr) error {
	ipa := allocator.NewIPAddress(ip, allocator.ServiceRef(svc.Namespace, svc.Name))
	op, err := p.alloc.PutIPAddress(ipa)
	if err != nil {
		return err
	}
	var ipRev int64
	if old := p.byName[ipa.Name]; old != nil {
		ipRev = revisionOf(old.ResourceVersion)
	}
	if err := p.fix(ctx, serviceKey(svc.Namespace, svc.Name), revisionOf(svc.ResourceVersion), ipa.Name, ipRev, op); err != nil {
		return err
	}
	p.byName[ipa.Name] = ipa
	return nil
}

// references: the IPAddress names a Service (of the core group).
func references(ipa *networkingv1.IPAddress) bool {
	ref := ipa.Spec.ParentRef
	return ref != nil && ref.Group == "" && ref.Resource == "services"
}

// labelled: the IPAddress has the labels upstream's allocator gives it.
func labelled(ipa *networkingv1.IPAddress) bool {
	ip, err := netip.ParseAddr(ipa.Name)
	return err == nil && ipa.Labels[networkingv1.LabelManagedBy] == allocator.ManagedBy &&
		ipa.Labels[networkingv1.LabelIPAddressFamily] == string(allocator.FamilyOf(ip))
}

func holds(svc *corev1.Service, ip string) bool { return slices.Contains(service.ClusterIPs(svc), ip) }

// run checks every Service's cluster IPs, then every IPAddress the
// allocator owns, with upstream's events.
func (p *ipRepair) run(ctx context.Context, svcs []*corev1.Service) error {
	byKey := map[string]*corev1.Service{}
	for _, svc := range svcs {
		byKey[svc.Namespace+"/"+svc.Name] = svc
	}
	for _, svc := range svcs {
		for _, clusterIP := range service.ClusterIPs(svc) {
			if err := p.checkClusterIP(ctx, svc, clusterIP, byKey); err != nil {
				return err
			}
		}
	}
	for name, ipa := range p.byName {
		if err := p.checkIPAddress(ctx, name, ipa, byKey); err != nil {
			return err
		}
	}
	return nil
}

// checkClusterIP gives a Service's cluster IP its IPAddress when it has
// none, a wrong one or one without the allocator's labels.
func (p *ipRepair) checkClusterIP(ctx context.Context, svc *corev1.Service, clusterIP string, byKey map[string]*corev1.Service) error {
	report := func(action, reason, message string) {
		p.problems = append(p.problems, serviceProblem(svc, ipRepairComponent, action, reason, message))
	}
	a, ok := netip.AddrFromSlice(netutils.ParseIPSloppy(clusterIP))
	if !ok {
		report("ClusterIPValidation", "ClusterIPNotValid", fmt.Sprintf("Cluster IP %s is not a valid IP; please recreate Service", clusterIP))
		return nil
	}
	ip := a.Unmap()
	family := allocator.FamilyOf(ip)
	if !p.alloc.Covers(ip) {
		report("ClusterIPAllocation", "ClusterIPOutOfRange",
			fmt.Sprintf("Cluster IP [%s]: %s is not within any configured Service CIDR; please recreate service", family, ip))
		return nil
	}
	wrongRef := fmt.Sprintf("the ClusterIP [%s]: %s for Service %s/%s has a wrong reference; repairing", family, ip, svc.Namespace, svc.Name)
	var reason, message string
	switch ipa := p.byName[ip.String()]; {
	case ipa == nil:
		reason, message = "ClusterIPNotAllocated", fmt.Sprintf("Cluster IP [%s]: %s is not allocated; repairing", family, ip)
	case !references(ipa):
		reason, message = "ClusterIPNotAllocated", wrongRef
	case ipa.Spec.ParentRef.Namespace != svc.Namespace || ipa.Spec.ParentRef.Name != svc.Name:
		if other := byKey[ipa.Spec.ParentRef.Namespace+"/"+ipa.Spec.ParentRef.Name]; other != nil && holds(other, ipa.Name) {
			report("ClusterIPAllocation", "ClusterIPAlreadyAllocated",
				fmt.Sprintf("Cluster IP [%s]:%s was assigned to multiple services; please recreate service", family, ip))
			return nil
		}
		reason, message = "ClusterIPNotAllocated", wrongRef
	case labelled(ipa):
		return nil
	}
	// An IPAddress without the allocator's labels is replaced silently.
	if err := p.allocate(ctx, svc, ip); err != nil {
		return err
	}
	if reason != "" {
		report("ClusterIPAllocation", reason, message)
	}
	return nil
}

// checkIPAddress deletes an IPAddress of the allocator that names no
// Service, a Service that is gone, or one that does not hold its address.
func (p *ipRepair) checkIPAddress(ctx context.Context, name string, ipa *networkingv1.IPAddress, byKey map[string]*corev1.Service) error {
	if ipa.Labels[networkingv1.LabelManagedBy] != allocator.ManagedBy {
		return nil // not the allocator's
	}
	ref := ipa.Spec.ParentRef
	var svc *corev1.Service
	var svcKey string
	if references(ipa) {
		svc, svcKey = byKey[ref.Namespace+"/"+ref.Name], serviceKey(ref.Namespace, ref.Name)
	}
	var svcRev int64
	var reason, message string
	switch {
	case !references(ipa):
		reason, message = "IPAddressNotAllocated", fmt.Sprintf("IPAddress %s appears to have been modified, not referencing a Service %v: cleaning up", name, ref)
	case svc == nil:
		reason, message = "IPAddressNotAllocated", fmt.Sprintf("IPAddress: %s for Service %s/%s appears to have leaked: cleaning up", name, ref.Namespace, ref.Name)
	case holds(svc, name):
		return nil
	default:
		svcRev = revisionOf(svc.ResourceVersion)
		reason, message = "IPAddressWrongReference", fmt.Sprintf("IPAddress: %s for Service %s/%s has a wrong reference; cleaning up", name, ref.Namespace, ref.Name)
	}
	if err := p.fix(ctx, svcKey, svcRev, name, revisionOf(ipa.ResourceVersion), clientv3.OpDelete(allocator.IPAddressesPrefix+name)); err != nil {
		return err
	}
	slog.Warn("deleted an IPAddress no Service holds", "ipaddress", name, "reason", reason)
	p.problems = append(p.problems, ipAddressProblem(ipa, reason, message))
	return nil
}

func checkPort(rb *allocator.Rebuild, cfg *allocator.Config, svc *corev1.Service, port int) *problem {
	stored, err := rb.UsePort(port)
	var notInRange *allocator.PortNotInRangeError
	var reason, message string
	switch {
	case err == nil && stored:
		return nil
	case err == nil:
		reason, message = "PortNotAllocated", fmt.Sprintf("Port %d is not allocated; repairing", port)
	case errors.Is(err, allocator.ErrPortAllocated):
		reason, message = "PortAlreadyAllocated", fmt.Sprintf("Port %d was assigned to multiple services; please recreate service", port)
	case errors.As(err, &notInRange):
		reason, message = "PortOutOfRange", fmt.Sprintf("Port %d is not within the port range %s; please recreate service", port, cfg.NodePorts)
	default:
		reason, message = "UnknownError", fmt.Sprintf("Unable to allocate port %d due to an unknown error", port)
	}
	p := serviceProblem(svc, portRepairComponent, "PortAllocation", reason, message)
	return &p
}

// report logs a problem and records it as a Warning event on its object
// (in the default namespace for a cluster-scoped one, as upstream's event
// recorder does).
func (r *Repair) report(ctx context.Context, p problem) {
	slog.Warn("service allocation repair", "object", p.obj.Kind+" "+p.obj.Namespace+"/"+p.obj.Name, "reason", p.reason, "message", p.message)
	now := metav1.NewTime(time.Now())
	ns := p.obj.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.obj.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject: p.obj,
		Reason:         p.reason, Message: p.message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: p.component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: p.component, Action: p.action,
	}
	if _, err := r.Events.Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		slog.Error("record service allocation event", "object", p.obj.Namespace+"/"+p.obj.Name, "err", err)
	}
}
