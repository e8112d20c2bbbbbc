package allocator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The RangeAllocation bitmaps of the flag ranges (serviceips,
// secondaryserviceips) are a view of the IPAddresses in Addresses' cache:
// written once the cache has been quiet for viewQuiet, and at least every
// viewMaxDelay while it keeps changing, only where they differ from it.
const (
	viewCheck    = 500 * time.Millisecond
	viewQuiet    = time.Second
	viewMaxDelay = 10 * time.Second
)

// writeViewIfDue writes the bitmap view when it is due.
func (a *Addresses) writeViewIfDue(ctx context.Context) {
	a.mu.Lock()
	due := a.dirty && (time.Since(a.changed) >= viewQuiet || time.Since(a.viewed) >= viewMaxDelay)
	a.mu.Unlock()
	if due {
		if err := a.WriteView(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("write the service IP bitmaps", "err", err)
		}
	}
}

// ipKey is the RangeAllocation key of the i-th flag range.
func ipKey(i int) string {
	if i == 0 {
		return ServiceIPsKey
	}
	return SecondaryServiceIPsKey
}

// WriteView writes the RangeAllocation bitmaps of the service CIDRs from
// the cache, where they differ from it.
func (a *Addresses) WriteView(ctx context.Context) error {
	a.mu.Lock()
	views := make([]*Bitmap, len(a.cfg.ServiceCIDRs))
	for k := range views {
		views[k] = a.taken[k].clone()
	}
	a.dirty, a.viewed = false, time.Now()
	a.mu.Unlock()
	for k, b := range views {
		if err := a.writeView(ctx, ipKey(k), a.cfg.ServiceCIDRs[k].String(), b); err != nil {
			a.mu.Lock()
			a.dirty = true
			a.mu.Unlock()
			return err
		}
	}
	return nil
}

func (a *Addresses) writeView(ctx context.Context, key, spec string, b *Bitmap) error {
	resp, err := a.client.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	var modRev int64
	if len(resp.Kvs) == 1 {
		modRev = resp.Kvs[0].ModRevision
		if ra, err := decodeRange(resp.Kvs[0].Value); err == nil && ra.Range == spec && bytes.Equal(ra.Data, b.Bytes()) {
			return nil
		}
	}
	val, err := encode(spec, b)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	txn, err := a.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(clientv3.OpPut(key, val)).Commit()
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	if !txn.Succeeded {
		return fmt.Errorf("write %s: written meanwhile", key)
	}
	slog.Debug("wrote service IP bitmap", "key", key, "revision", txn.Header.Revision)
	return nil
}
