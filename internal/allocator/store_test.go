package allocator

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// commit writes a transaction's bitmaps as a Service write would.
func commit(t *testing.T, cli *clientv3.Client, txn *Txn) error {
	t.Helper()
	extra, settle, err := txn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Txn(context.Background()).If(extra.If...).Then(extra.Then...).Commit()
	if err == nil && !resp.Succeeded {
		err = storage.ErrExtraFailed
	}
	settle(err)
	return err
}

func TestStoreAllocatesInEtcd(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	cfg, err := ParseConfig("10.0.0.0/28", "30000-30003")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(cli, cfg)

	// Before the repair created the bitmaps nothing can be allocated.
	txn, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.AllocateNextIP("IPv4"); err == nil || err.Error() != "cannot allocate resources of type serviceipallocations at this time" {
		t.Fatalf("allocate without bitmaps: %v", err)
	}
	txn.Abort()
	rb, err := s.StartRebuild(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := rb.Commit(ctx); err != nil || len(keys) != 2 {
		t.Fatalf("rebuild wrote %v, %v", keys, err)
	}

	// A /28 has 14 usable addresses, then the range is full.
	seen := map[netip.Addr]bool{}
	txn, _ = s.Begin(ctx)
	for k := 0; k < 14; k++ {
		ip, err := txn.AllocateNextIP("IPv4")
		if err != nil || seen[ip] {
			t.Fatalf("allocation %d: %s, %v", k, ip, err)
		}
		seen[ip] = true
	}
	if _, err := txn.AllocateNextIP("IPv4"); !errors.Is(err, ErrFull) {
		t.Fatalf("15th address: %v", err)
	}
	if err := txn.AllocatePort(30002); err != nil {
		t.Fatal(err)
	}
	if err := txn.AllocatePort(30002); !errors.Is(err, ErrPortAllocated) {
		t.Fatalf("port taken twice: %v", err)
	}
	if err := commit(t, cli, txn); err != nil {
		t.Fatal(err)
	}

	// Another API server's store sees the committed state; a write from
	// a stale view fails its condition and the next one reads again.
	other := NewStore(cli, cfg)
	stale, _ := other.Begin(ctx)
	stale.ReleaseIP(netip.MustParseAddr("10.0.0.1"))
	txn, _ = s.Begin(ctx)
	txn.ReleaseIP(netip.MustParseAddr("10.0.0.2"))
	if err := commit(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, cli, stale); !errors.Is(err, storage.ErrExtraFailed) {
		t.Fatalf("stale write: %v", err)
	}
	fresh, _ := other.Begin(ctx)
	if err := fresh.AllocateIP(netip.MustParseAddr("10.0.0.1")); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("10.0.0.1 after the failed release: %v", err)
	}
	if err := fresh.AllocateIP(netip.MustParseAddr("10.0.0.2")); err != nil {
		t.Fatalf("10.0.0.2 after its release: %v", err)
	}
	if !fresh.HasPort(30002) || fresh.HasPort(30001) {
		t.Fatal("port bitmap not read back")
	}
	fresh.Abort()
}

func TestRebuildRangeChange(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	old, _ := ParseConfig("10.0.0.0/24", "30000-30100")
	s := NewStore(cli, old)
	rb, _ := s.StartRebuild(ctx, 0)
	for _, ip := range []string{"10.0.0.10", "10.0.0.200"} {
		if _, err := rb.UseIP(netip.MustParseAddr(ip)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rb.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The flags now say /25: 10.0.0.10 stays known, 10.0.0.200 is out of
	// range, a duplicate is reported, and the range is rewritten.
	cfg, _ := ParseConfig("10.0.0.0/25", "30000-30100")
	rb, err := NewStore(cli, cfg).StartRebuild(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := rb.UseIP(netip.MustParseAddr("10.0.0.10")); err != nil || !stored {
		t.Fatalf("10.0.0.10: %v %v", stored, err)
	}
	if _, err := rb.UseIP(netip.MustParseAddr("10.0.0.10")); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := rb.UseIP(netip.MustParseAddr("10.0.0.200")); !errors.Is(err, ErrMismatchedNetwork) {
		t.Fatalf("out of range: %v", err)
	}
	if _, err := rb.UseIP(netip.MustParseAddr("fd00::1")); !errors.Is(err, ErrFamilyNotConfigured) {
		t.Fatalf("IPv6: %v", err)
	}
	if ips, _ := rb.Leaked(); len(ips) != 1 || ips[0].String() != "10.0.0.200" {
		t.Fatalf("leaked %v", ips)
	}
	keys, err := rb.Commit(ctx)
	if err != nil || len(keys) != 1 || keys[0] != ServiceIPsKey {
		t.Fatalf("rewrote %v, %v", keys, err)
	}
	resp, _ := cli.Get(ctx, ServiceIPsKey)
	if got := string(resp.Kvs[0].Value); got != `{"kind":"RangeAllocation","apiVersion":"v1","metadata":{},"range":"10.0.0.0/25","data":"AgA="}` {
		t.Fatalf("stored %s", got)
	}
}

// Two API servers on one etcd: a release from a store whose cached bitmap
// lacks the value (another server allocated it since) fails its condition
// instead of leaving the value set, and a refusal from a cached bitmap is
// a stale one, not a verdict.
func TestStoreDecisionsFromAStaleCache(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	cfg, err := ParseConfig("10.0.0.0/28", "30000-30003")
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewStore(cli, cfg), NewStore(cli, cfg)
	rb, _ := a.StartRebuild(ctx, 0)
	if _, err := rb.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.0.0.5")
	// b caches the bitmaps with a write of its own.
	txn, _ := b.Begin(ctx)
	if err := txn.AllocatePort(30000); err != nil || commit(t, cli, txn) != nil {
		t.Fatal(err)
	}
	// a allocates 10.0.0.5; b, from its cache, releases it.
	txn, _ = a.Begin(ctx)
	if err := txn.AllocateIP(ip); err != nil || commit(t, cli, txn) != nil {
		t.Fatal(err)
	}
	stale, _ := b.Begin(ctx)
	if stale.Fresh() {
		t.Fatal("b read the bitmaps again without a failed write")
	}
	stale.ReleaseIP(ip)
	if err := commit(t, cli, stale); !errors.Is(err, storage.ErrExtraFailed) {
		t.Fatalf("release from a cache without the value: %v, want the condition to fail", err)
	}
	txn, _ = b.Begin(ctx)
	if !txn.Fresh() {
		t.Fatal("b did not read again after its failed write")
	}
	txn.ReleaseIP(ip)
	if err := commit(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	// a's cache still has 10.0.0.5: its refusal is not fresh.
	txn, _ = a.Begin(ctx)
	if err := txn.AllocateIP(ip); !errors.Is(err, ErrIPAllocated) || txn.Fresh() {
		t.Fatalf("allocate from a's cache: %v (fresh %v)", err, txn.Fresh())
	}
	txn.AbortStale()
	txn, _ = a.Begin(ctx)
	if err := txn.AllocateIP(ip); err != nil || !txn.Fresh() {
		t.Fatalf("allocate after reading again: %v (fresh %v)", err, txn.Fresh())
	}
	txn.Abort()
}
