package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

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

// Store keeps the bitmaps of a Config in etcd.
//
// Every write of a bitmap key is conditioned on the key's etcd version (a
// per-key write counter) and create revision being those the bitmap was
// computed from, so a write applies to exactly the state it saw, whichever
// API server made it. This API server makes one such write at a time:
// concurrent ones would only fail each other's conditions (etcd may apply
// them in any order). It remembers the bitmaps its last write left, so it
// reads them again only when a write failed on them (another API server,
// or the repair, wrote them since) or failed in an unknown way.
type Store struct {
	cfg    *Config
	client *clientv3.Client
	// sem admits one Txn at a time, from Begin until its write is
	// settled, and guards tip.
	sem chan struct{}
	// tip is, by key, the state after the last write or read; nil when
	// the keys must be read again.
	tip map[string]*keyState
}

// keyState is one bitmap key as read or last written.
type keyState struct {
	key, spec          string
	createRev, version int64 // of the key in etcd; 0 when it is missing
	bitmap             *Bitmap
	// unusable says why the bitmap cannot be used: the key is missing
	// (the repair at start creates it) or holds another range.
	unusable error
}

// NewStore returns a Store of cfg's ranges in etcd.
func NewStore(client *clientv3.Client, cfg *Config) *Store {
	return &Store{cfg: cfg, client: client, sem: make(chan struct{}, 1)}
}

// Config is the store's ranges.
func (s *Store) Config() *Config { return s.cfg }

// keyResource names the allocation kind in upstream's "at this time"
// error.
func keyResource(key string) string {
	if key == NodePortsKey {
		return "servicenodeportallocations"
	}
	return "serviceipallocations"
}

func ipKey(i int) string {
	if i == 0 {
		return ServiceIPsKey
	}
	return SecondaryServiceIPsKey
}

// stored is one bitmap key as read from etcd.
type stored struct {
	ra                         *corev1.RangeAllocation
	modRev, createRev, version int64
}

// read returns the bitmap keys at revision rev (0: the latest).
func (s *Store) read(ctx context.Context, rev int64) (map[string]stored, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	resp, err := s.client.Get(ctx, RangesPrefix, opts...)
	if err != nil {
		return nil, fmt.Errorf("read allocation bitmaps: %w", err)
	}
	out := map[string]stored{}
	for _, kv := range resp.Kvs {
		ra := &corev1.RangeAllocation{}
		if err := json.Unmarshal(kv.Value, ra); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out[string(kv.Key)] = stored{ra: ra, modRev: kv.ModRevision, createRev: kv.CreateRevision, version: kv.Version}
	}
	return out, nil
}

// unchanged is the condition that the key is still as st knows it.
func (st *keyState) unchanged() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(st.key), "=", st.createRev),
		clientv3.Compare(clientv3.Version(st.key), "=", st.version),
	}
}

// load reads the bitmaps into tip.
func (s *Store) load(ctx context.Context) error {
	read, err := s.read(ctx, 0)
	if err != nil {
		return err
	}
	tip := map[string]*keyState{}
	add := func(key, spec string, fresh *Bitmap) error {
		st := &keyState{key: key, spec: spec}
		tip[key] = st
		got, ok := read[key]
		switch {
		case !ok:
			st.unusable = fmt.Errorf("cannot allocate resources of type %s at this time", keyResource(key))
			return nil
		case got.ra.Range != spec:
			st.unusable = errors.New("the provided range does not match the current range")
		default:
			if err := fresh.SetBytes(got.ra.Data); err != nil {
				return fmt.Errorf("decode %s: %w", key, err)
			}
			st.bitmap = fresh
		}
		st.createRev, st.version = got.createRev, got.version
		return nil
	}
	for i, r := range s.cfg.ServiceCIDRs {
		if err := add(ipKey(i), r.String(), r.NewBitmap()); err != nil {
			return err
		}
	}
	if err := add(NodePortsKey, s.cfg.NodePorts.String(), s.cfg.NodePorts.NewBitmap()); err != nil {
		return err
	}
	s.tip = tip
	return nil
}

// invalidate makes the next Txn read the bitmaps again.
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

// Txn is one write's view of the bitmaps: the values it takes and frees
// commit with the object through the storage.Extra of Commit, or not at
// all, and so do the conditions that the bitmaps it decided from (changed
// or not: a release of a value the tip lacks) are still those in etcd.
type Txn struct {
	store *Store
	// work holds the changed bitmaps by key, copies of the tip's.
	work map[string]*Bitmap
	// read names the keys a decision was taken from.
	read map[string]bool
	// fresh: the tip was read from etcd for this transaction.
	fresh bool
}

// Begin waits for the store's turn and reads the bitmaps unless the tip
// is known. Commit or Abort must follow.
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
	return &Txn{store: s, work: map[string]*Bitmap{}, read: map[string]bool{}, fresh: fresh}, nil
}

// Abort ends a transaction that will not be written.
func (t *Txn) Abort() { <-t.store.sem }

// Fresh reports whether the transaction decided from bitmaps read from
// etcd for it, rather than from those this store's last write left
// (another API server may have written since): a refusal ("already
// allocated", "range is full") from a Txn that is not fresh is to be
// checked again after AbortStale.
func (t *Txn) Fresh() bool { return t.fresh }

// AbortStale ends a transaction that will not be written and makes the
// next one read the bitmaps from etcd.
func (t *Txn) AbortStale() {
	t.store.tip = nil
	<-t.store.sem
}

// Commit returns what must commit with the object, and settle, to be
// called with the outcome of the write (nil when committed), which ends the
// transaction. The next Txn starts from the bitmaps this one leaves.
func (t *Txn) Commit() (extra storage.Extra, settle func(error), err error) {
	next := map[string]*keyState{}
	for key, b := range t.work {
		st := t.store.tip[key]
		val, err := encode(st.spec, b)
		if err != nil {
			<-t.store.sem
			return storage.Extra{}, nil, fmt.Errorf("encode %s: %w", key, err)
		}
		extra.If = append(extra.If, st.unchanged()...)
		extra.Then = append(extra.Then, clientv3.OpPut(key, val))
		n := *st
		n.version, n.bitmap = st.version+1, b
		next[key] = &n
	}
	for key := range t.read {
		if _, changed := t.work[key]; changed {
			continue
		}
		extra.If = append(extra.If, t.store.tip[key].unchanged()...)
	}
	if len(extra.If) == 0 {
		<-t.store.sem
		return storage.Extra{}, func(error) {}, nil
	}
	return extra, func(err error) {
		switch {
		case err == nil:
			for key, st := range next {
				t.store.tip[key] = st
			}
		case errors.Is(err, storage.ErrExists), errors.Is(err, storage.ErrConflict), errors.Is(err, storage.ErrNotFound):
			// The object's own condition failed: nothing was written
			// and the tip still holds.
		default:
			t.store.tip = nil
		}
		<-t.store.sem
	}, nil
}

// bitmap returns the bitmap of key to read (forWrite false) or change.
func (t *Txn) bitmap(key string, forWrite bool) (*Bitmap, error) {
	if b, ok := t.work[key]; ok {
		return b, nil
	}
	st := t.store.tip[key]
	if st.unusable != nil {
		return nil, st.unusable
	}
	t.read[key] = true
	if !forWrite {
		return st.bitmap, nil
	}
	b := st.bitmap.clone()
	t.work[key] = b
	return b, nil
}

// ipKeyOf is the key of a family's bitmap, with its range; "" when the
// family is not configured.
func (t *Txn) ipKeyOf(family corev1.IPFamily) (string, *IPRange) {
	for i, r := range t.store.cfg.ServiceCIDRs {
		if r.Family() == family {
			return ipKey(i), r
		}
	}
	return "", nil
}

// AllocateIP takes a chosen address from its family's range.
func (t *Txn) AllocateIP(ip netip.Addr) error {
	key, r := t.ipKeyOf(FamilyOf(ip))
	if r == nil {
		return ErrMismatchedNetwork
	}
	i, err := r.Index(ip)
	if err != nil {
		return err
	}
	if b, err := t.bitmap(key, false); err != nil {
		return err
	} else if b.Has(i) {
		return ErrIPAllocated
	}
	b, _ := t.bitmap(key, true)
	b.Allocate(i)
	return nil
}

// AllocateNextIP takes a free address of a configured family.
func (t *Txn) AllocateNextIP(family corev1.IPFamily) (netip.Addr, error) {
	key, r := t.ipKeyOf(family)
	if b, err := t.bitmap(key, false); err != nil {
		return netip.Addr{}, err
	} else if b.Free() == 0 {
		return netip.Addr{}, ErrFull
	}
	b, _ := t.bitmap(key, true)
	i, _ := b.AllocateNext()
	return r.Addr(i), nil
}

// ReleaseIP frees an address; addresses outside the ranges, or of a range
// whose bitmap cannot be used, are ignored (the repair rebuilds those).
func (t *Txn) ReleaseIP(ip netip.Addr) {
	key, r := t.ipKeyOf(FamilyOf(ip))
	if r == nil {
		return
	}
	i, err := r.Index(ip)
	if err != nil {
		return
	}
	if b, err := t.bitmap(key, false); err == nil && b.Has(i) {
		b, _ = t.bitmap(key, true)
		b.Release(i)
	}
}

// AllocatePort takes a chosen node port.
func (t *Txn) AllocatePort(port int) error {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return err
	}
	if b, err := t.bitmap(NodePortsKey, false); err != nil {
		return err
	} else if b.Has(i) {
		return ErrPortAllocated
	}
	b, _ := t.bitmap(NodePortsKey, true)
	b.Allocate(i)
	return nil
}

// AllocateNextPort takes a free node port.
func (t *Txn) AllocateNextPort() (int, error) {
	if b, err := t.bitmap(NodePortsKey, false); err != nil {
		return 0, err
	} else if b.Free() == 0 {
		return 0, ErrFull
	}
	b, _ := t.bitmap(NodePortsKey, true)
	i, _ := b.AllocateNext()
	return t.store.cfg.NodePorts.Base + i, nil
}

// ReleasePort frees a node port; ports outside the range are ignored.
func (t *Txn) ReleasePort(port int) {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return
	}
	if b, err := t.bitmap(NodePortsKey, false); err == nil && b.Has(i) {
		b, _ = t.bitmap(NodePortsKey, true)
		b.Release(i)
	}
}

// HasPort reports whether a node port is taken.
func (t *Txn) HasPort(port int) bool {
	i, err := t.store.cfg.NodePorts.Index(port)
	if err != nil {
		return false
	}
	b, err := t.bitmap(NodePortsKey, false)
	return err == nil && b.Has(i)
}
