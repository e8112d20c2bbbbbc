package allocator

import (
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/svcnet/svcnet/internal/storage"
)

// IPAddressesPrefix is the etcd prefix of the networking.k8s.io/v1
// IPAddress objects, one per allocated cluster IP, named by the address.
const IPAddressesPrefix = "/registry/ipaddresses/"

// ManagedBy is the value of the ipaddress.kubernetes.io/managed-by label
// on the IPAddresses the Service allocator creates, as upstream's
// ipallocator controller name.
const ManagedBy = "ipallocator.k8s.io"

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
// Addresses come from the ranges of --service-cluster-ip-range (the
// `kubernetes` ServiceCIDR) and from the CIDRs of every other ServiceCIDR
// that is Ready and not being deleted, as upstream's allocator takes them
// from every such ServiceCIDR (see ranges.go's Config and cidrs.go).
//
// Dynamic picks come from a cache of the taken addresses, a bitmap per
// range fed by watches of the IPAddress and ServiceCIDR keys; a pick the
// cache has not yet seen taken fails its condition and the write is
// retried. The cache is also the source of the RangeAllocation bitmaps
// under /registry/ranges/ (serviceips, secondaryserviceips) of the flag
// ranges, kept as a view for tools that read them (see view.go). They are
// not consulted when allocating.
type Addresses struct {
	cfg    *Config
	client *clientv3.Client
	codec  storage.Codec

	mu sync.Mutex
	// all are the addresses whose IPAddress exists; cidrs the
	// ServiceCIDRs by name. Sync listed both at revision listed; watch
	// events up to it are in the lists already.
	all    map[netip.Addr]bool
	cidrs  map[string]*networkingv1.ServiceCIDR
	listed int64
	// ranges are those allocated from: the flag ranges, in their order,
	// then the other CIDRs of ready ServiceCIDRs; taken holds, by index of
	// ranges, the addresses of all that fall in each.
	ranges []*IPRange
	taken  []*Bitmap
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

// Config is the allocator's flag ranges.
func (a *Addresses) Config() *Config { return a.cfg }

// ipOfKey is the address an IPAddress key names.
func ipOfKey(key []byte) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(strings.TrimPrefix(string(key), IPAddressesPrefix))
	return ip, err == nil
}

// Sync reads the IPAddresses and ServiceCIDRs from etcd into the cache.
func (a *Addresses) Sync(ctx context.Context) error {
	resp, err := a.client.Get(ctx, IPAddressesPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("list IP addresses: %w", err)
	}
	rev := resp.Header.Revision
	all := map[netip.Addr]bool{}
	for _, kv := range resp.Kvs {
		if ip, ok := ipOfKey(kv.Key); ok {
			all[ip] = true
		}
	}
	resp, err = a.client.Get(ctx, ServiceCIDRsPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return fmt.Errorf("list service CIDRs: %w", err)
	}
	cidrs := map[string]*networkingv1.ServiceCIDR{}
	for _, kv := range resp.Kvs {
		if sc, err := decodeAs[*networkingv1.ServiceCIDR](a.codec, kv.Value); err == nil {
			cidrs[sc.Name] = sc
		} else {
			slog.Warn("skip a stored ServiceCIDR", "key", string(kv.Key), "err", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all, a.cidrs, a.listed = all, cidrs, rev
	a.ranges, a.taken = nil, nil
	a.rebuildRanges()
	// A hold lasts until the cache shows the address: the watch skips
	// the events this read covers, so the read ends those holds itself.
	for ip, at := range a.held {
		if all[ip] || time.Since(at) >= heldFor {
			delete(a.held, ip)
		}
	}
	a.touch()
	return nil
}

// touch records a change of the cache; a.mu is held.
func (a *Addresses) touch() {
	a.changed, a.dirty = time.Now(), true
}

// Run follows the IPAddress and ServiceCIDR keys from the revision Sync
// read, and writes the bitmap view, until ctx ends.
func (a *Addresses) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, a.writeViewIfDue, viewCheck) })
	defer wg.Wait()
	for ctx.Err() == nil {
		a.mu.Lock()
		rev := a.listed
		a.mu.Unlock()
		wctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, 2)
		go func() { errs <- a.follow(wctx, IPAddressesPrefix, rev, a.applyIP) }()
		go func() { errs <- a.follow(wctx, ServiceCIDRsPrefix, rev, a.applyCIDR) }()
		err := <-errs
		cancel()
		<-errs
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

// follow applies the events of prefix after rev to the cache, through
// apply (called with a.mu held) for those the last Sync did not list,
// until the watch fails.
func (a *Addresses) follow(ctx context.Context, prefix string, rev int64, apply func(ev *clientv3.Event)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range a.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		a.mu.Lock()
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > a.listed {
				apply(ev)
			}
		}
		a.mu.Unlock()
	}
	return errors.New("watch closed")
}

// applyIP records an IPAddress created or deleted; a.mu is held.
func (a *Addresses) applyIP(ev *clientv3.Event) {
	ip, ok := ipOfKey(ev.Kv.Key)
	if !ok {
		return
	}
	delete(a.held, ip)
	put := ev.Type == clientv3.EventTypePut
	if put {
		a.all[ip] = true
	} else {
		delete(a.all, ip)
	}
	for k, r := range a.ranges {
		if i, err := r.Index(ip); err == nil {
			if put {
				a.taken[k].Allocate(i)
			} else {
				a.taken[k].Release(i)
			}
		}
	}
	a.touch()
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

// storedIPAddress is an IPAddress as read from etcd, with its revision.
type storedIPAddress struct {
	*networkingv1.IPAddress
	modRevision int64
}

// decodeAs reads a stored object of kind T.
func decodeAs[T runtime.Object](codec storage.Codec, value []byte) (T, error) {
	var zero T
	obj, err := codec.Decode(value)
	if err != nil {
		return zero, fmt.Errorf("decode %T: %w", zero, err)
	}
	typed, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("decode %T: stored object is a %T", zero, obj)
	}
	return typed, nil
}

// get reads the IPAddress of ip; ok is false when there is none.
func (a *Addresses) get(ctx context.Context, ip netip.Addr) (got storedIPAddress, ok bool, err error) {
	resp, err := a.client.Get(ctx, IPAddressKey(ip))
	if err != nil {
		return storedIPAddress{}, false, fmt.Errorf("read IPAddress %s: %w", ip, err)
	}
	if len(resp.Kvs) == 0 {
		return storedIPAddress{}, false, nil
	}
	ipa, err := decodeAs[*networkingv1.IPAddress](a.codec, resp.Kvs[0].Value)
	return storedIPAddress{IPAddress: ipa, modRevision: resp.Kvs[0].ModRevision}, err == nil, err
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
// IPNotInRangeError outside the ranges, ErrIPAllocated when its IPAddress
// exists.
func (t *IPTxn) Allocate(ctx context.Context, ip netip.Addr, parent *networkingv1.ParentReference) error {
	if t.a.InRange(ip) != nil {
		// The cache may lag behind a ServiceCIDR just created: read it
		// anew before refusing.
		if err := t.a.Sync(ctx); err != nil {
			return err
		}
		if err := t.a.InRange(ip); err != nil {
			return err
		}
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

// pick chooses a free address of the family, as the bitmaps choose, from
// the first range that has one, and holds it.
func (a *Addresses) pick(family corev1.IPFamily) (netip.Addr, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for k, r := range a.ranges {
		if r.Family() != family {
			continue
		}
		i, ok := a.taken[k].NextFree(func(i int) bool {
			at, held := a.held[r.Addr(i)]
			return held && now.Sub(at) < heldFor
		})
		if !ok {
			continue
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
	t.extra.If = append(t.extra.If, clientv3.Compare(clientv3.ModRevision(key), "=", got.modRevision))
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
