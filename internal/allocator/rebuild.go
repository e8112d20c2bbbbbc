package allocator

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRebuildConflict: the node port bitmap changed after the revision a
// rebuild was computed at; list the Services again and retry.
var ErrRebuildConflict = errors.New("allocation bitmaps changed during the rebuild")

// Rebuild computes the node port bitmap anew from the ports the stored
// Services hold, for the repair: the bitmap is rewritten when its range
// changed or it disagrees with the Services.
type Rebuild struct {
	store  *Store
	stored stored
	found  bool
	fresh  *Bitmap
	// The stored bitmap decoded over the range it was stored with (which
	// differs from the configured one when the flag changed); nil when
	// there is nothing usable.
	storedPorts *Bitmap
	storedRange *PortRange
}

// StartRebuild reads the stored bitmap at revision rev, the revision the
// Services were listed at, and starts an empty one beside it.
func (s *Store) StartRebuild(ctx context.Context, rev int64) (*Rebuild, error) {
	got, ok, err := s.read(ctx, rev)
	if err != nil {
		return nil, err
	}
	r := &Rebuild{store: s, stored: got, found: ok, fresh: s.cfg.NodePorts.NewBitmap()}
	if ok {
		if was, err := ParsePortRange(got.ra.Range); err == nil {
			if bm := was.NewBitmap(); bm.SetBytes(got.ra.Data) == nil {
				r.storedPorts, r.storedRange = bm, was
			}
		}
	}
	return r, nil
}

// UsePort marks a node port in use. It reports whether the stored bitmap
// had it; errors: PortNotInRangeError, ErrPortAllocated (used twice).
func (r *Rebuild) UsePort(port int) (stored bool, err error) {
	i, err := r.store.cfg.NodePorts.Index(port)
	if err != nil {
		return false, err
	}
	if !r.fresh.Allocate(i) {
		return true, ErrPortAllocated
	}
	if r.storedPorts == nil {
		return false, nil
	}
	j, err := r.storedRange.Index(port)
	return err == nil && r.storedPorts.Has(j), nil
}

// Leaked lists the ports the stored bitmap holds that no Service uses.
func (r *Rebuild) Leaked() (ports []int) {
	if r.storedPorts != nil {
		r.storedPorts.ForEach(func(j int) {
			port := r.storedRange.Base + j
			if i, err := r.store.cfg.NodePorts.Index(port); err != nil || !r.fresh.Has(i) {
				ports = append(ports, port)
			}
		})
	}
	return ports
}

// Commit writes the rebuilt bitmap if it differs from the stored one and
// reports whether it did; ErrRebuildConflict when it was written since.
func (r *Rebuild) Commit(ctx context.Context) (bool, error) {
	spec := r.store.cfg.NodePorts.String()
	if r.found && r.stored.ra.Range == spec && bytes.Equal(r.stored.ra.Data, r.fresh.Bytes()) {
		return false, nil
	}
	val, err := encode(spec, r.fresh)
	if err != nil {
		return false, fmt.Errorf("encode %s: %w", NodePortsKey, err)
	}
	resp, err := r.store.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(NodePortsKey), "=", r.stored.modRev)).
		Then(clientv3.OpPut(NodePortsKey, val)).Commit()
	r.store.invalidate()
	if err != nil {
		return false, fmt.Errorf("write rebuilt bitmap: %w", err)
	}
	if !resp.Succeeded {
		return false, ErrRebuildConflict
	}
	return true, nil
}
