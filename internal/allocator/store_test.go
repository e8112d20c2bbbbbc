package allocator

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// commit writes a transaction's extra as a Service write would, and
// settles it with the outcome.
func commit(t *testing.T, cli *clientv3.Client, extra storage.Extra, settle func(error)) error {
	t.Helper()
	resp, err := cli.Txn(context.Background()).If(extra.If...).Then(extra.Then...).Commit()
	if err == nil && !resp.Succeeded {
		err = storage.ErrExtraFailed
	}
	settle(err)
	return err
}

// commitPorts commits a node port transaction.
func commitPorts(t *testing.T, cli *clientv3.Client, txn *Txn) error {
	t.Helper()
	extra, settle, err := txn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return commit(t, cli, extra, settle)
}

func TestStoreAllocatesInEtcd(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	cfg, err := ParseConfig("10.0.0.0/28", "30000-30003")
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(cli, cfg)

	// Before the repair created the bitmap nothing can be allocated.
	txn, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.AllocateNextPort(); err == nil || err.Error() != "cannot allocate resources of type servicenodeportallocations at this time" {
		t.Fatalf("allocate without the bitmap: %v", err)
	}
	txn.Abort()
	rb, err := s.StartRebuild(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wrote, err := rb.Commit(ctx); err != nil || !wrote {
		t.Fatalf("rebuild wrote %v, %v", wrote, err)
	}

	// Four ports, then the range is full.
	seen := map[int]bool{30002: true}
	txn, _ = s.Begin(ctx)
	if err := txn.AllocatePort(30002); err != nil {
		t.Fatal(err)
	}
	if err := txn.AllocatePort(30002); !errors.Is(err, ErrPortAllocated) {
		t.Fatalf("port taken twice: %v", err)
	}
	for k := 0; k < 3; k++ {
		port, err := txn.AllocateNextPort()
		if err != nil || seen[port] {
			t.Fatalf("allocation %d: %d, %v", k, port, err)
		}
		seen[port] = true
	}
	if _, err := txn.AllocateNextPort(); !errors.Is(err, ErrFull) {
		t.Fatalf("fifth port: %v", err)
	}
	if err := commitPorts(t, cli, txn); err != nil {
		t.Fatal(err)
	}

	// Another API server's store sees the committed state; a write from
	// a stale view fails its condition and the next one reads again.
	other := NewStore(cli, cfg)
	stale, _ := other.Begin(ctx)
	stale.ReleasePort(30001)
	txn, _ = s.Begin(ctx)
	txn.ReleasePort(30002)
	if err := commitPorts(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	if err := commitPorts(t, cli, stale); !errors.Is(err, storage.ErrExtraFailed) {
		t.Fatalf("stale write: %v", err)
	}
	fresh, _ := other.Begin(ctx)
	if err := fresh.AllocatePort(30001); !errors.Is(err, ErrPortAllocated) {
		t.Fatalf("30001 after the failed release: %v", err)
	}
	if err := fresh.AllocatePort(30002); err != nil {
		t.Fatalf("30002 after its release: %v", err)
	}
	fresh.Abort()
}

func TestRebuildRangeChange(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	old, _ := ParseConfig("10.0.0.0/24", "30000-30100")
	rb, _ := NewStore(cli, old).StartRebuild(ctx, 0)
	for _, port := range []int{30010, 30090} {
		if _, err := rb.UsePort(port); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rb.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The flag now says 30000-30050: 30010 stays known, 30090 is out of
	// range, a duplicate is reported, and the range is rewritten.
	cfg, _ := ParseConfig("10.0.0.0/24", "30000-30050")
	rb, err := NewStore(cli, cfg).StartRebuild(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := rb.UsePort(30010); err != nil || !stored {
		t.Fatalf("30010: %v %v", stored, err)
	}
	if _, err := rb.UsePort(30010); !errors.Is(err, ErrPortAllocated) {
		t.Fatalf("duplicate: %v", err)
	}
	var notInRange *PortNotInRangeError
	if _, err := rb.UsePort(30090); !errors.As(err, &notInRange) {
		t.Fatalf("out of range: %v", err)
	}
	if ports := rb.Leaked(); len(ports) != 1 || ports[0] != 30090 {
		t.Fatalf("leaked %v", ports)
	}
	if wrote, err := rb.Commit(ctx); err != nil || !wrote {
		t.Fatalf("rewrote %v, %v", wrote, err)
	}
	resp, _ := cli.Get(ctx, NodePortsKey)
	if got := string(resp.Kvs[0].Value); got != `{"kind":"RangeAllocation","apiVersion":"v1","metadata":{},"range":"30000-30050","data":"BAA="}` {
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
	cfg, err := ParseConfig("10.0.0.0/28", "30000-30010")
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewStore(cli, cfg), NewStore(cli, cfg)
	rb, _ := a.StartRebuild(ctx, 0)
	if _, err := rb.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const port = 30005
	// b caches the bitmap with a write of its own.
	txn, _ := b.Begin(ctx)
	if err := txn.AllocatePort(30000); err != nil || commitPorts(t, cli, txn) != nil {
		t.Fatal(err)
	}
	// a allocates 30005; b, from its cache, releases it.
	txn, _ = a.Begin(ctx)
	if err := txn.AllocatePort(port); err != nil || commitPorts(t, cli, txn) != nil {
		t.Fatal(err)
	}
	stale, _ := b.Begin(ctx)
	if stale.Fresh() {
		t.Fatal("b read the bitmap again without a failed write")
	}
	stale.ReleasePort(port)
	if err := commitPorts(t, cli, stale); !errors.Is(err, storage.ErrExtraFailed) {
		t.Fatalf("release from a cache without the value: %v, want the condition to fail", err)
	}
	txn, _ = b.Begin(ctx)
	if !txn.Fresh() {
		t.Fatal("b did not read again after its failed write")
	}
	txn.ReleasePort(port)
	if err := commitPorts(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	// a's cache still has 30005: its refusal is not fresh.
	txn, _ = a.Begin(ctx)
	if err := txn.AllocatePort(port); !errors.Is(err, ErrPortAllocated) || txn.Fresh() {
		t.Fatalf("allocate from a's cache: %v (fresh %v)", err, txn.Fresh())
	}
	txn.AbortStale()
	txn, _ = a.Begin(ctx)
	if err := txn.AllocatePort(port); err != nil || !txn.Fresh() {
		t.Fatalf("allocate after reading again: %v (fresh %v)", err, txn.Fresh())
	}
	txn.Abort()
}
