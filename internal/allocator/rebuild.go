package allocator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
)

// ErrRebuildConflict: a bitmap changed after the revision a rebuild was
// computed at; list the Services again and retry.
var ErrRebuildConflict = errors.New("allocation bitmaps changed during the rebuild")

// ErrFamilyNotConfigured: an address of an IP family that has no service
// CIDR on this cluster.
var ErrFamilyNotConfigured = errors.New("IP family is not configured on this cluster")

// Rebuild computes every bitmap anew from the values the stored Services
// hold, for the repair: a bitmap is rewritten when its range changed or it
// disagrees with the Services.
type Rebuild struct {
	store  *Store
	stored map[string]stored
	// fresh are the rebuilt bitmaps by key.
	fresh map[string]*Bitmap
	// The stored bitmaps decoded over the ranges they were stored with
	// (which differ from the configured ones when the flags changed);
	// absent where there is nothing usable.
	storedIPs   map[corev1.IPFamily]storedIPs
	storedPorts *Bitmap
	storedRange *PortRange
}

type storedIPs struct {
	rng    *IPRange
	bitmap *Bitmap
}

// StartRebuild reads the stored bitmaps at revision rev, the revision the
// Services were listed at, and starts empty ones beside them.
func (s *Store) StartRebuild(ctx context.Context, rev int64) (*Rebuild, error) {
	read, err := s.read(ctx, rev)
	if err != nil {
		return nil, err
	}
	r := &Rebuild{store: s, stored: read, fresh: map[string]*Bitmap{}, storedIPs: map[corev1.IPFamily]storedIPs{}}
	for i, rng := range s.cfg.ServiceCIDRs {
		r.fresh[ipKey(i)] = rng.NewBitmap()
		got, ok := read[ipKey(i)]
		if !ok {
			continue
		}
		was, err := ParseIPRange(got.ra.Range)
		if err != nil || was.Family() != rng.Family() {
			continue // nothing usable to compare with
		}
		if bm := was.NewBitmap(); bm.SetBytes(got.ra.Data) == nil {
			r.storedIPs[rng.Family()] = storedIPs{rng: was, bitmap: bm}
		}
	}
	r.fresh[NodePortsKey] = s.cfg.NodePorts.NewBitmap()
	if got, ok := read[NodePortsKey]; ok {
		if was, err := ParsePortRange(got.ra.Range); err == nil {
			if bm := was.NewBitmap(); bm.SetBytes(got.ra.Data) == nil {
				r.storedPorts, r.storedRange = bm, was
			}
		}
	}
	return r, nil
}

func (r *Rebuild) ipKeyOf(family corev1.IPFamily) (string, *IPRange) {
	for i, rng := range r.store.cfg.ServiceCIDRs {
		if rng.Family() == family {
			return ipKey(i), rng
		}
	}
	return "", nil
}

// UseIP marks an address in use. It reports whether the stored bitmap had
// it; errors: ErrFamilyNotConfigured, ErrMismatchedNetwork or
// IPNotInRangeError (out of range), ErrIPAllocated (used twice).
func (r *Rebuild) UseIP(ip netip.Addr) (stored bool, err error) {
	family := FamilyOf(ip)
	key, rng := r.ipKeyOf(family)
	if rng == nil {
		return false, ErrFamilyNotConfigured
	}
	i, err := rng.Index(ip)
	if err != nil {
		return false, err
	}
	if !r.fresh[key].Allocate(i) {
		return true, ErrIPAllocated
	}
	was, ok := r.storedIPs[family]
	if !ok {
		return false, nil
	}
	j, err := was.rng.Index(ip)
	return err == nil && was.bitmap.Has(j), nil
}

// UsePort marks a node port in use, like UseIP.
func (r *Rebuild) UsePort(port int) (stored bool, err error) {
	i, err := r.store.cfg.NodePorts.Index(port)
	if err != nil {
		return false, err
	}
	if !r.fresh[NodePortsKey].Allocate(i) {
		return true, ErrPortAllocated
	}
	if r.storedPorts == nil {
		return false, nil
	}
	j, err := r.storedRange.Index(port)
	return err == nil && r.storedPorts.Has(j), nil
}

// Leaked lists the values the stored bitmaps hold that no Service uses.
func (r *Rebuild) Leaked() (ips []netip.Addr, ports []int) {
	for _, was := range r.storedIPs {
		key, rng := r.ipKeyOf(was.rng.Family())
		was.bitmap.ForEach(func(j int) {
			ip := was.rng.Addr(j)
			if i, err := rng.Index(ip); err != nil || !r.fresh[key].Has(i) {
				ips = append(ips, ip)
			}
		})
	}
	if r.storedPorts != nil {
		r.storedPorts.ForEach(func(j int) {
			port := r.storedRange.Base + j
			if i, err := r.store.cfg.NodePorts.Index(port); err != nil || !r.fresh[NodePortsKey].Has(i) {
				ports = append(ports, port)
			}
		})
	}
	return ips, ports
}

// Commit writes the rebuilt bitmaps that differ from the stored ones and
// returns their keys; ErrRebuildConflict when one was written since.
func (r *Rebuild) Commit(ctx context.Context) ([]string, error) {
	specs := map[string]string{NodePortsKey: r.store.cfg.NodePorts.String()}
	for i, rng := range r.store.cfg.ServiceCIDRs {
		specs[ipKey(i)] = rng.String()
	}
	var keys []string
	txn := r.store.client.Txn(ctx)
	var ifs []clientv3.Cmp
	var puts []clientv3.Op
	for key, b := range r.fresh {
		got, ok := r.stored[key]
		if ok && got.ra.Range == specs[key] && bytes.Equal(got.ra.Data, b.Bytes()) {
			continue
		}
		val, err := encode(specs[key], b)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", key, err)
		}
		keys = append(keys, key)
		ifs = append(ifs, clientv3.Compare(clientv3.ModRevision(key), "=", got.modRev))
		puts = append(puts, clientv3.OpPut(key, val))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	resp, err := txn.If(ifs...).Then(puts...).Commit()
	r.store.invalidate()
	if err != nil {
		return nil, fmt.Errorf("write rebuilt bitmaps: %w", err)
	}
	if !resp.Succeeded {
		return nil, ErrRebuildConflict
	}
	return keys, nil
}
