package allocator

import (
	"log/slog"
	"net/netip"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceCIDRsPrefix is the etcd prefix of the networking.k8s.io/v1
// ServiceCIDR objects.
const ServiceCIDRsPrefix = "/registry/servicecidrs/"

// applyCIDR records a ServiceCIDR created, changed or deleted; a.mu is
// held.
func (a *Addresses) applyCIDR(ev *clientv3.Event) {
	if ev.Type == clientv3.EventTypeDelete {
		delete(a.cidrs, strings.TrimPrefix(string(ev.Kv.Key), ServiceCIDRsPrefix))
	} else if sc, err := decodeAs[*networkingv1.ServiceCIDR](a.codec, ev.Kv.Value); err == nil {
		a.cidrs[sc.Name] = sc
	} else {
		slog.Warn("skip a stored ServiceCIDR", "key", string(ev.Kv.Key), "err", err)
	}
	a.rebuildRanges()
}

// allocatable is upstream's test of a ServiceCIDR whose CIDRs are
// allocated from: not being deleted, and Ready (or without a Ready
// condition yet, when no controller has looked at it).
func allocatable(sc *networkingv1.ServiceCIDR) bool {
	if sc.DeletionTimestamp != nil {
		return false
	}
	for _, c := range sc.Status.Conditions {
		if c.Type == networkingv1.ServiceCIDRConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return true
}

// rebuildRanges recomputes the ranges from the flags and the ServiceCIDRs,
// keeping the bitmaps of ranges that stay and filling new ones from all;
// a.mu is held.
func (a *Addresses) rebuildRanges() {
	old := map[netip.Prefix]*Bitmap{}
	for k, r := range a.ranges {
		old[r.Prefix()] = a.taken[k]
	}
	var ranges []*IPRange
	seen := map[netip.Prefix]bool{}
	add := func(r *IPRange) {
		if seen[r.Prefix()] {
			return
		}
		seen[r.Prefix()] = true
		ranges = append(ranges, r)
	}
	for _, r := range a.cfg.ServiceCIDRs {
		add(r)
	}
	for _, sc := range a.cidrs {
		if !allocatable(sc) {
			continue
		}
		for _, cidr := range sc.Spec.CIDRs {
			r, err := ParseIPRange(cidr)
			// Only the families of the flags are allocated.
			if err == nil && a.cfg.Range(r.Family()) != nil {
				add(r)
			}
		}
	}
	taken := make([]*Bitmap, len(ranges))
	for k, r := range ranges {
		if b, ok := old[r.Prefix()]; ok {
			taken[k] = b
			continue
		}
		b := r.NewBitmap()
		for ip := range a.all {
			if i, err := r.Index(ip); err == nil {
				b.Allocate(i)
			}
		}
		taken[k] = b
	}
	a.ranges, a.taken = ranges, taken
}

// InRange checks that ip may be allocated: nil when a range has it,
// IPNotInRangeError when it is a range's network or broadcast address,
// else ErrMismatchedNetwork.
func (a *Addresses) InRange(ip netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var reserved error
	for _, r := range a.ranges {
		if _, err := r.Index(ip); err == nil {
			return nil
		} else if reserved == nil && r.Prefix().Contains(ip) {
			reserved = err
		}
	}
	if reserved != nil {
		return reserved
	}
	return ErrMismatchedNetwork
}

// Covers reports whether a flag range or any ServiceCIDR, whatever its
// state, contains ip (upstream's repair test of an address in range).
func (a *Addresses) Covers(ip netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.ranges {
		if r.Prefix().Contains(ip) {
			return true
		}
	}
	for _, sc := range a.cidrs {
		for _, cidr := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(cidr); err == nil && p.Contains(ip) {
				return true
			}
		}
	}
	return false
}
