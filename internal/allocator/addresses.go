package allocator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/storage"
)

// IPAddressesPrefix is the etcd prefix of the networking.k8s.io/v1
// IPAddress objects, one per allocated cluster IP, named by the address.
const IPAddressesPrefix = "/registry/ipaddresses/"

// ManagedBy is the value of the ipaddress.kubernetes.io/managed-by label
// on the IPAddresses the Service allocator creates, as upstream's
// ipallocator controller name.
const ManagedBy = "ipallocator.k8s.io"

// Timing of the bitmap view (see Addresses): written once the IPAddresses
// have been quiet for viewQuiet, and at least every viewMaxDelay while
// they keep changing.
const (
	viewCheck    = 500 * time.Millisecond
	viewQuiet    = time.Second
	viewMaxDelay = 10 * time.Second
)

// heldFor bounds how long an address this server picked is skipped while
// the watch has not yet shown its IPAddress.
const heldFor = 30 * time.Second

// Addresses allocates cluster IPs as upstream's IPAddress-based allocator
// (KEP-1880) does: an address is taken when its IPAddress object exists.
// The object is created, and deleted on release, in the etcd transaction of
// the Service write (the storage.Extra of an IPTxn), conditioned on the
// key being free or on the revision it was read at, so two API servers
// conflict only when they pick the same address and nothing leaks when one
// dies.
//
// Dynamic picks come from a cache of the taken addresses, a bitmap per
// range fed by a watch of the IPAddress keys; a pick the cache has not yet
// seen taken fails its condition and the write is retried. The cache is
// also the source of the RangeAllocation bitmaps under /registry/ranges/
// (serviceips, secondaryserviceips), which are kept as a view for tools that
// read them: rewritten, coalesced, after the IPAddresses change. They are
// not consulted when allocating.
type Addresses struct {
	cfg    *Config
	client *clientv3.Client
	codec  storage.Codec

	mu sync.Mutex
	// taken is the cache: by index of cfg.ServiceCIDRs, the addresses
	// whose IPAddress exists as of revision rev. Sync listed them at
	// revision listed; watch events up to it are in the list already.
	taken       []*Bitmap
	rev, listed int64
	// held are the addresses this server picked and whose IPAddress the
	// cache does not show yet, with the time of the pick.
	held map[netip.Addr]time.Time
	// changed is when the cache last changed, viewed when the view was
	// last written from it (zero: never since the change).
	changed, viewed time.Time
	dirty           bool
}

// NewAddresses returns the allocator of cfg's service CIDRs; codec stores
// the IPAddress objects as the API server stores them. Sync must run
// before the first allocation.
func NewAddresses(client *clientv3.Client, cfg *Config, codec storage.Codec) *Addresses {
	return &Addresses{cfg: cfg, client: client, codec: codec, held: map[netip.Addr]time.Time{}}
}

// Config is the allocator's ranges.
func (a *Addresses) Config() *Config { return a.cfg }

// rangeOf is the index and range of ip's service CIDR, -1 when ip is in
// none.
func (a *Addresses) rangeOf(ip netip.Addr) (int, *IPRange, int) {
	for k, r := range a.cfg.ServiceCIDRs {
		if i, err := r.Index(ip); err == nil {
			return k, r, i
		}
	}
	return -1, nil, 0
}

// ipOfKey is the address an IPAddress key names.
func ipOfKey(key []byte) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(strings.TrimPrefix(string(key), IPAddressesPrefix))
	return ip, err == nil
}

// Sync reads the taken addresses from etcd into the cache.
func (a *Addresses) Sync(ctx context.Context) error {
	resp, err := a.client.Get(ctx, IPAddressesPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list IP addresses: %w", err)
	}
	taken := make([]*Bitmap, len(a.cfg.ServiceCIDRs))
	for k, r := range a.cfg.ServiceCIDRs {
		taken[k] = r.NewBitmap()
	}
	for _, kv := range resp.Kvs {
		if ip, ok := ipOfKey(kv.Key); ok {
			if k, _, i := a.rangeOf(ip); k >= 0 {
				taken[k].Allocate(i)
			}
		}
	}
	a.mu.Lock()
	a.taken, a.rev, a.listed = taken, resp.Header.Revision, resp.Header.Revision
	for ip, at := range a.held {
		if time.Since(at) >= heldFor {
			delete(a.held, ip)
		}
	}
	a.touch()
	a.mu.Unlock()
	return nil
}

// touch records a change of the cache; a.mu is held.
func (a *Addresses) touch() {
	a.changed, a.dirty = time.Now(), true
}

// Run follows the IPAddress keys from the revision Sync read, and writes
// the bitmap view, until ctx ends.
func (a *Addresses) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { a.runView(ctx) })
	defer wg.Wait()
	for ctx.Err() == nil {
		a.mu.Lock()
		rev := a.rev
		a.mu.Unlock()
		err := a.follow(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		slog.Warn("IP address watch ended, reading the addresses again", "err", err)
		if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
			slog.Error("read IP addresses", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// follow applies the watch's events after rev to the cache until the
// watch fails.
func (a *Addresses) follow(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range a.client.Watch(wctx, IPAddressesPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		a.mu.Lock()
		for _, ev := range resp.Events {
			a.apply(ev.Kv.Key, ev.Kv.ModRevision, ev.Type == clientv3.EventTypePut)
		}
		a.mu.Unlock()
	}
	return errors.New("watch closed")
}

// apply records that the address of key was created (or deleted) at rev,
// unless the list of the last Sync has it already; a.mu is held.
func (a *Addresses) apply(key []byte, rev int64, put bool) {
	if rev <= a.listed {
		return
	}
	a.rev = max(a.rev, rev)
	ip, ok := ipOfKey(key)
	if !ok {
		return
	}
	delete(a.held, ip)
	k, _, i := a.rangeOf(ip)
	if k < 0 {
		return
	}
	if put {
		a.taken[k].Allocate(i)
	} else {
		a.taken[k].Release(i)
	}
	a.touch()
}

// runView writes the bitmap view when it is due.
func (a *Addresses) runView(ctx context.Context) {
	t := time.NewTicker(viewCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		due := a.dirty && (time.Since(a.changed) >= viewQuiet || time.Since(a.viewed) >= viewMaxDelay)
		a.mu.Unlock()
		if due {
			if err := a.WriteView(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("write the service IP bitmaps", "err", err)
			}
		}
	}
}

// WriteView writes the RangeAllocation bitmaps of the service CIDRs from
// the cache, where they differ from it.
func (a *Addresses) WriteView(ctx context.Context) error {
	a.mu.Lock()
	views := make([]*Bitmap, len(a.taken))
	for k, b := range a.taken {
		views[k] = b.clone()
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

// ServiceRef is upstream's parent reference of a Service's IPAddress.
func ServiceRef(namespace, name string) *networkingv1.ParentReference {
	return &networkingv1.ParentReference{Resource: "services", Namespace: namespace, Name: name}
}

// NewIPAddress is the IPAddress upstream's allocator creates for an
// address of a Service.
func NewIPAddress(ip netip.Addr, parent *networkingv1.ParentReference) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: ip.String(),
			UID:  types.UID(uuid.NewString()),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(FamilyOf(ip)),
				networkingv1.LabelManagedBy:       ManagedBy,
			},
			CreationTimestamp: metav1.Now(),
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: parent},
	}
}

// IPAddressKey is the etcd key of an address's IPAddress.
func IPAddressKey(ip netip.Addr) string { return IPAddressesPrefix + ip.String() }

// PutIPAddress is the operation that stores obj.
func (a *Addresses) PutIPAddress(obj *networkingv1.IPAddress) (clientv3.Op, error) {
	data, err := a.codec.Encode(obj)
	if err != nil {
		return clientv3.Op{}, fmt.Errorf("encode IPAddress %s: %w", obj.Name, err)
	}
	return clientv3.OpPut(IPAddressesPrefix+obj.Name, string(data)), nil
}

// StoredIPAddress is an IPAddress as read from etcd, with its revision.
type StoredIPAddress struct {
	*networkingv1.IPAddress
	ModRevision int64
}

// Decode reads a stored IPAddress.
func (a *Addresses) Decode(value []byte, modRev int64) (StoredIPAddress, error) {
	obj, err := a.codec.Decode(value)
	if err != nil {
		return StoredIPAddress{}, fmt.Errorf("decode IPAddress: %w", err)
	}
	ipa, ok := obj.(*networkingv1.IPAddress)
	if !ok {
		return StoredIPAddress{}, fmt.Errorf("decode IPAddress: stored object is a %T", obj)
	}
	return StoredIPAddress{IPAddress: ipa, ModRevision: modRev}, nil
}

// get reads the IPAddress of ip; ok is false when there is none.
func (a *Addresses) get(ctx context.Context, ip netip.Addr) (got StoredIPAddress, ok bool, err error) {
	resp, err := a.client.Get(ctx, IPAddressKey(ip))
	if err != nil {
		return StoredIPAddress{}, false, fmt.Errorf("read IPAddress %s: %w", ip, err)
	}
	if len(resp.Kvs) == 0 {
		return StoredIPAddress{}, false, nil
	}
	got, err = a.Decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	return got, err == nil, err
}

// IPTxn is one Service write's IPAddress changes, which commit with the
// Service through Extra, or not at all.
type IPTxn struct {
	a      *Addresses
	extra  storage.Extra
	picked []netip.Addr
}

// Begin starts the IP changes of one write.
func (a *Addresses) Begin() *IPTxn { return &IPTxn{a: a} }

// create adds the creation of ip's IPAddress, conditioned on it not
// existing.
func (t *IPTxn) create(ip netip.Addr, parent *networkingv1.ParentReference) error {
	op, err := t.a.PutIPAddress(NewIPAddress(ip, parent))
	if err != nil {
		return err
	}
	t.extra.If = append(t.extra.If, clientv3.Compare(clientv3.CreateRevision(IPAddressKey(ip)), "=", 0))
	t.extra.Then = append(t.extra.Then, op)
	return nil
}

// Allocate takes a chosen address: ErrMismatchedNetwork or
// IPNotInRangeError outside the service CIDRs, ErrIPAllocated when its
// IPAddress exists.
func (t *IPTxn) Allocate(ctx context.Context, ip netip.Addr, parent *networkingv1.ParentReference) error {
	r := t.a.cfg.Range(FamilyOf(ip))
	if r == nil {
		return ErrMismatchedNetwork
	}
	if _, err := r.Index(ip); err != nil {
		return err
	}
	if _, taken, err := t.a.get(ctx, ip); err != nil {
		return err
	} else if taken {
		return ErrIPAllocated
	}
	return t.create(ip, parent)
}

// AllocateNext takes a free address of a configured family, or fails with
// ErrFull.
func (t *IPTxn) AllocateNext(ctx context.Context, family corev1.IPFamily, parent *networkingv1.ParentReference) (netip.Addr, error) {
	ip, ok := t.a.pick(family)
	if !ok {
		// The cache may lag behind releases: read it anew before
		// answering that the range is full.
		if err := t.a.Sync(ctx); err != nil {
			return netip.Addr{}, err
		}
		if ip, ok = t.a.pick(family); !ok {
			return netip.Addr{}, ErrFull
		}
	}
	t.picked = append(t.picked, ip)
	return ip, t.create(ip, parent)
}

// pick chooses a free address, as the bitmaps choose, and holds it.
func (a *Addresses) pick(family corev1.IPFamily) (netip.Addr, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, r := range a.cfg.ServiceCIDRs {
		if r.Family() != family {
			continue
		}
		now := time.Now()
		i, ok := a.taken[k].NextFree(func(i int) bool {
			at, held := a.held[r.Addr(i)]
			return held && now.Sub(at) < heldFor
		})
		if !ok {
			return netip.Addr{}, false
		}
		ip := r.Addr(i)
		a.held[ip] = now
		return ip, true
	}
	return netip.Addr{}, false
}

// Release frees an address held by parent: its IPAddress is deleted,
// conditioned on the revision it is read at. An address without an
// IPAddress, or whose IPAddress names another parent, is left alone (the
// repair reports those).
func (t *IPTxn) Release(ctx context.Context, ip netip.Addr, parent *networkingv1.ParentReference) error {
	got, ok, err := t.a.get(ctx, ip)
	if err != nil || !ok {
		return err
	}
	if ref := got.Spec.ParentRef; ref == nil || *ref != *parent {
		return nil
	}
	key := IPAddressKey(ip)
	t.extra.If = append(t.extra.If, clientv3.Compare(clientv3.ModRevision(key), "=", got.ModRevision))
	t.extra.Then = append(t.extra.Then, clientv3.OpDelete(key))
	return nil
}

// Extra is what must commit with the Service.
func (t *IPTxn) Extra() storage.Extra { return t.extra }

// Settle ends the transaction with the outcome of the write (nil when
// committed). Picked addresses stay held until the cache shows them when
// the write committed or its conditions failed (another server may hold
// them), and are free again otherwise.
func (t *IPTxn) Settle(err error) {
	if len(t.picked) == 0 || err == nil || errors.Is(err, storage.ErrExtraFailed) {
		return
	}
	t.a.mu.Lock()
	for _, ip := range t.picked {
		delete(t.a.held, ip)
	}
	t.a.mu.Unlock()
}
