package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/storage"
)

// Keys of the RangeAllocation objects, named as upstream names them under
// its /registry prefix: the primary service CIDR, the secondary one of a
// dual-stack cluster, and the node ports.
const (
	RangesPrefix           = "/registry/ranges/"
	ServiceIPsKey          = RangesPrefix + "serviceips"
	SecondaryServiceIPsKey = RangesPrefix + "secondaryserviceips"
	NodePortsKey           = RangesPrefix + "servicenodeports"
)

// Store keeps the node port bitmap of a Config in etcd.
//
// Every write of the bitmap is conditioned on the key's etcd version (a
// per-key write counter) and create revision being those the bitmap was
// computed from, so a write applies to exactly the state it saw, whichever
// API server made it. This API server makes one such write at a time:
// concurrent ones would only fail each other's conditions (etcd may apply
// them in any order). It remembers the bitmap its last write left, so it
// reads it again only when a write failed on it (another API server, or
// the repair, wrote it since) or failed in an unknown way.
type Store struct {
	cfg    *Config
	client *clientv3.Client
	// sem admits one Txn at a time, from Begin until its write is
	// settled, and guards tip.
	sem chan struct{}
	// tip is the state after the last write or read; nil when the key
	// must be read again.
	tip *keyState
}

// keyState is the bitmap key as read or last written.
type keyState struct {
	createRev, version int64 // of the key in etcd; 0 when it is missing
	bitmap             *Bitmap
	// unusable says why the bitmap cannot be used: the key is missing
	// (the repair at start creates it) or holds another range.
	unusable error
}

// NewStore returns a Store of cfg's node ports in etcd.
func NewStore(client *clientv3.Client, cfg *Config) *Store {
	return &Store{cfg: cfg, client: client, sem: make(chan struct{}, 1)}
}

// Config is the store's ranges.
func (s *Store) Config() *Config { return s.cfg }

// stored is one bitmap key as read from etcd.
type stored struct {
	ra                         *corev1.RangeAllocation
	modRev, createRev, version int64
}

// decodeRange reads a stored RangeAllocation.
func decodeRange(value []byte) (*corev1.RangeAllocation, error) {
	ra := &corev1.RangeAllocation{}
	if err := json.Unmarshal(value, ra); err != nil {
		return nil, err
	}
	return ra, nil
}

// read returns the node port key at revision rev (0: the latest); ok is
// false when it is missing.
func (s *Store) read(ctx context.Context, rev int64) (got stored, ok bool, err error) {
	var opts []clientv3.OpOption
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.client.Get(ctx, NodePortsKey, opts...)
	if err != nil {
		return stored{}, false, fmt.Errorf("read node port bitmap: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return stored{}, false, nil
	}
	kv := resp.Kvs[0]
	ra, err := decodeRange(kv.Value)
	if err != nil {
		return stored{}, false, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return stored{ra: ra, modRev: kv.ModRevision, createRev: kv.CreateRevision, version: kv.Version}, true, nil
}

// unchanged is the condition that the key is still as st knows it.
func (st *keyState) unchanged() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(NodePortsKey), "=", st.createRev),
		clientv3.Compare(clientv3.Version(NodePortsKey), "=", st.version),
	}
}

// load reads the bitmap into tip.
func (s *Store) load(ctx context.Context) error {
	got, ok, err := s.read(ctx, 0)
	if err != nil {
		return err
	}
	st := &keyState{}
	switch spec := s.cfg.NodePorts.String(); {
	case !ok:
		st.unusable = errors.New("cannot allocate resources of type servicenodeportallocations at this time")
	case got.ra.Range != spec:
		st.unusable = errors.New("the provided range does not match the current range")
	default:
		fresh := s.cfg.NodePorts.NewBitmap()
		if err := fresh.SetBytes(got.ra.Data); err != nil {
			return fmt.Errorf("decode %s: %w", NodePortsKey, err)
		}
		st.bitmap = fresh
	}
	st.createRev, st.version = got.createRev, got.version
	s.tip = st
	return nil
}

// invalidate makes the next Txn read the bitmap again.
func (s *Store) invalidate() {
	s.sem <- struct{}{}
	s.tip = nil
	<-s.sem
}

// encode is the stored RangeAllocation of a bitmap.
func encode(spec string, b *Bitmap) (string, error) {
	data, err := json.Marshal(&corev1.RangeAllocation{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "RangeAllocation"},
		Range:    spec,
		Data:     b.Bytes(),
	})
	return string(data), err
}

// Txn is one write's view of the node port bitmap: the ports it takes and
// frees commit with the object through the storage.Extra of Commit, or
// not at all, and so does the condition that the bitmap it decided from
// (changed or not: a release of a port the tip lacks) is still the one in
// etcd.
type Txn struct {
	store *Store
	// work is the changed bitmap, a copy of the tip's.
	work *Bitmap
	// read: a decision was taken from the bitmap.
	read bool
	// fresh: the tip was read from etcd for this transaction.
	fresh bool
}

// Begin waits for the store's turn and reads the bitmap unless the tip is
// known. Commit or Abort must follow.
func (s *Store) Begin(ctx context.Context) (*Txn, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fresh := s.tip == nil
	if fresh {
		if err := s.load(ctx); err != nil {
			<-s.sem
			return nil, err
		}
	}
	return &Txn{store: s, fresh: fresh}, nil
}

// Abort ends a transaction that will not be written.
func (t *Txn) Abort() { <-t.store.sem }

// Fresh reports whether the transaction decided from a bitmap read from
// etcd for it, rather than from the one this store's last write left
// (another API server may have written since): a refusal ("already
// allocated", "range is full") from a Txn that is not fresh is to be
// checked again after AbortStale.
func (t *Txn) Fresh() bool { return t.fresh }

// AbortStale ends a transaction that will not be written and makes the
// next one read the bitmap from etcd.
func (t *Txn) AbortStale() {
	t.store.tip = nil
	<-t.store.sem
}

// Commit returns what must commit with the object, and settle, to be
// called with the outcome of the write (nil when committed), which ends the
// transaction. The next Txn starts from the bitmap this one leaves.
func (t *Txn) Commit() (extra storage.Extra, settle func(error), err error) {
	st := t.store.tip
	if !t.read {
		<-t.store.sem
		return storage.Extra{}, func(error) {}, nil
	}
	extra.If = st.unchanged()
	next := st
	if t.work != nil {
		val, err := encode(t.store.cfg.NodePorts.String(), t.work)
		if err != nil {
			<-t.store.sem
			return storage.Extra{}, nil, fmt.Errorf("encode %s: %w", NodePortsKey, err)
		}
		extra.Then = []clientv3.Op{clientv3.OpPut(NodePortsKey, val)}
		n := *st
		n.version, n.bitmap = st.version+1, t.work
		next = &n
	}
	return extra, func(err error) {
		switch {
		case err == nil:
			t.store.tip = next
		case errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			// The object's own condition failed: nothing was written
			// and the tip still holds.
		default:
			t.store.tip = nil
		}
		<-t.store.sem
	}, nil
}

// bitmap returns the bitmap to read (forWrite false) or change.
func (t *Txn) bitmap(forWrite bool) (*Bitmap, error) {
	if t.work != nil {
		return t.work, nil
	}
	st := t.store.tip
	if st.unusable != nil {
		return nil, st.unusable
	}
	t.read = true
	if !forWrite {
		return st.bitmap, nil
	}
	t.work = st.bitmap.clone()
	return t.work, nil
}

// AllocatePort takes a chosen node port.
func (t *Txn) AllocatePort(port int) error {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return err
	}
	if b, err := t.bitmap(false); err != nil {
		return err
	} else if b.Has(i) {
		return ErrPortAllocated
	}
	b, _ := t.bitmap(true)
	b.Allocate(i)
	return nil
}

// AllocateNextPort takes a free node port.
func (t *Txn) AllocateNextPort() (int, error) {
	if b, err := t.bitmap(false); err != nil {
		return 0, err
	} else if b.Free() == 0 {
		return 0, ErrFull
	}
	b, _ := t.bitmap(true)
	i, _ := b.AllocateNext()
	return t.store.cfg.NodePorts.Base + i, nil
}

// ReleasePort frees a node port; ports outside the range are ignored.
func (t *Txn) ReleasePort(port int) {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return
	}
	if b, err := t.bitmap(false); err == nil && b.Has(i) {
		b, _ = t.bitmap(true)
		b.Release(i)
	}
}

// HasPort reports whether a node port is taken.
func (t *Txn) HasPort(port int) bool {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return false
	}
	b, err := t.bitmap(false)
	return err == nil && b.Has(i)
}
