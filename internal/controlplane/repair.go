// Package controlplane holds the API server's own controllers, after
// upstream's pkg/controlplane/controller and the Service allocation repair
// controllers: the repair of the allocation bitmaps from the stored
// Services, and the `kubernetes` Service with the Endpoints and
// EndpointSlice that list the live API servers.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/allocator"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/storage"
)

// Event sources of the repair, as upstream names its two controllers.
const (
	ipRepairComponent   = "ipallocator-repair-controller"
	portRepairComponent = "portallocator-repair-controller"
)

// repairAttempts bounds the rebuilds that lose the race with Service
// writes of other API servers.
const repairAttempts = 20

// Repair rebuilds the allocation bitmaps from the stored Services. Because
// every Service write commits with its bitmap change, the bitmaps only
// disagree with the Services when the ranges were changed, a bitmap was
// lost, or the data was edited behind the API server; Repair then rewrites
// them, and logs and records a Warning event for every Service whose IP or
// port is invalid, out of range or used twice.
type Repair struct {
	Store  *storage.Store
	Alloc  *allocator.Store
	Events corev1client.EventsGetter
}

// problem is one finding about a Service, reported once the rebuild is
// committed.
type problem struct {
	svc                        *corev1.Service
	component, reason, message string
}

// RunOnce repairs until a rebuild commits without racing other writers.
func (r *Repair) RunOnce(ctx context.Context) error {
	for range repairAttempts {
		problems, err := r.rebuild(ctx)
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

func (r *Repair) rebuild(ctx context.Context) ([]problem, error) {
	list, err := r.Store.List(ctx, "/registry/services/", storage.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	rb, err := r.Alloc.StartRebuild(ctx, list.Revision)
	if err != nil {
		return nil, err
	}
	var problems []problem
	for _, obj := range list.Items {
		svc := obj.(*corev1.Service)
		for _, ip := range service.ClusterIPs(svc) {
			if p := checkIP(rb, r.Alloc.Config(), svc, ip); p != nil {
				problems = append(problems, *p)
			}
		}
		for _, port := range service.NodePorts(svc) {
			if p := checkPort(rb, r.Alloc.Config(), svc, port); p != nil {
				problems = append(problems, *p)
			}
		}
	}
	keys, err := rb.Commit(ctx)
	if err != nil {
		return nil, err
	}
	ips, ports := rb.Leaked()
	for _, ip := range ips {
		slog.Warn("released a cluster IP no Service holds", "ip", ip)
	}
	for _, port := range ports {
		slog.Warn("released a node port no Service holds", "port", port)
	}
	if len(keys) > 0 {
		slog.Info("rebuilt service allocation bitmaps", "keys", keys, "services", len(list.Items))
	}
	return problems, nil
}

func checkIP(rb *allocator.Rebuild, cfg *allocator.Config, svc *corev1.Service, ip string) *problem {
	a, ok := netip.AddrFromSlice(netutils.ParseIPSloppy(ip))
	if !ok {
		return &problem{svc, ipRepairComponent, "ClusterIPNotValid",
			fmt.Sprintf("Cluster IP %s is not a valid IP; please recreate service", ip)}
	}
	a = a.Unmap()
	family := allocator.FamilyOf(a)
	stored, err := rb.UseIP(a)
	var notInRange *allocator.IPNotInRangeError
	switch {
	case err == nil && stored:
		return nil
	case err == nil:
		return &problem{svc, ipRepairComponent, "ClusterIPNotAllocated",
			fmt.Sprintf("Cluster IP [%s]:%s is not allocated; repairing", family, a)}
	case errors.Is(err, allocator.ErrIPAllocated):
		return &problem{svc, ipRepairComponent, "ClusterIPAlreadyAllocated",
			fmt.Sprintf("Cluster IP [%s]:%s was assigned to multiple services; please recreate service", family, a)}
	case errors.Is(err, allocator.ErrFamilyNotConfigured):
		return &problem{svc, ipRepairComponent, "ClusterIPNotValid",
			fmt.Sprintf("Cluster IP %s(%s) is of ip family that is no longer configured on cluster; please recreate service", a, family)}
	case errors.Is(err, allocator.ErrMismatchedNetwork) || errors.As(err, &notInRange):
		return &problem{svc, ipRepairComponent, "ClusterIPOutOfRange",
			fmt.Sprintf("Cluster IP [%s]:%s is not within the service CIDR %s; please recreate service", family, a, cfg.Range(family))}
	}
	return &problem{svc, ipRepairComponent, "UnknownError",
		fmt.Sprintf("Unable to allocate cluster IP [%s]:%s due to an unknown error", family, a)}
}

func checkPort(rb *allocator.Rebuild, cfg *allocator.Config, svc *corev1.Service, port int) *problem {
	stored, err := rb.UsePort(port)
	var notInRange *allocator.PortNotInRangeError
	switch {
	case err == nil && stored:
		return nil
	case err == nil:
		return &problem{svc, portRepairComponent, "PortNotAllocated", fmt.Sprintf("Port %d is not allocated; repairing", port)}
	case errors.Is(err, allocator.ErrPortAllocated):
		return &problem{svc, portRepairComponent, "PortAlreadyAllocated",
			fmt.Sprintf("Port %d was assigned to multiple services; please recreate service", port)}
	case errors.As(err, &notInRange):
		return &problem{svc, portRepairComponent, "PortOutOfRange",
			fmt.Sprintf("Port %d is not within the port range %s; please recreate service", port, cfg.NodePorts)}
	}
	return &problem{svc, portRepairComponent, "UnknownError", fmt.Sprintf("Unable to allocate port %d due to an unknown error", port)}
}

// report logs a problem and records it as a Warning event on the Service.
func (r *Repair) report(ctx context.Context, p problem) {
	slog.Warn("service allocation repair", "service", p.svc.Namespace+"/"+p.svc.Name, "reason", p.reason, "message", p.message)
	now := metav1.NewTime(time.Now())
	action := "ClusterIPAllocation"
	if p.component == portRepairComponent {
		action = "PortAllocation"
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.svc.Name, now.UnixNano()), Namespace: p.svc.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: p.svc.Namespace,
			Name: p.svc.Name, UID: p.svc.UID, ResourceVersion: p.svc.ResourceVersion},
		Reason: p.reason, Message: p.message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: p.component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: p.component, Action: action,
	}
	if _, err := r.Events.Events(p.svc.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		slog.Error("record service allocation event", "service", p.svc.Namespace+"/"+p.svc.Name, "err", err)
	}
}
