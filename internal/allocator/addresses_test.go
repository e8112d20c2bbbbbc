package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

// commitIPs commits an IP transaction.
func commitIPs(t *testing.T, cli *clientv3.Client, txn *IPTxn) error {
	t.Helper()
	return commit(t, cli, txn.Extra(), txn.Settle)
}

// startAddresses is one API server's allocator, synced and following etcd
// until the test ends.
func startAddresses(t *testing.T, cli *clientv3.Client, cidrs string) *Addresses {
	t.Helper()
	cfg, err := ParseConfig(cidrs, "30000-30010")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAddresses(cli, cfg, registry.JSONCodec{})
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		a.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return a
}

// waitTaken waits until a's cache shows ip taken (or free).
func waitTaken(t *testing.T, a *Addresses, ip netip.Addr, want bool) {
	t.Helper()
	within(t, func() string {
		a.mu.Lock()
		got := a.all[ip]
		a.mu.Unlock()
		if got != want {
			return fmt.Sprintf("%s taken in the cache: %v, want %v", ip, got, want)
		}
		return ""
	})
}

// within waits up to 10 s for cond to answer "", and fails with its last
// answer.
func within(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAddressesAreIPAddressObjects(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	a := startAddresses(t, cli, "10.0.0.0/28")
	web := ServiceRef("default", "web")

	txn := a.Begin()
	ip := netip.MustParseAddr("10.0.0.5")
	if err := txn.Allocate(ctx, ip, web); err != nil {
		t.Fatal(err)
	}
	if err := commitIPs(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	resp, _ := cli.Get(ctx, IPAddressesPrefix+"10.0.0.5")
	if len(resp.Kvs) != 1 {
		t.Fatal("no IPAddress stored")
	}
	var stored networkingv1.IPAddress
	if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.Kind != "IPAddress" || stored.APIVersion != "networking.k8s.io/v1" || stored.UID == "" ||
		stored.Labels["ipaddress.kubernetes.io/ip-family"] != "IPv4" || stored.Labels["ipaddress.kubernetes.io/managed-by"] != "ipallocator.k8s.io" ||
		*stored.Spec.ParentRef != (networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}) {
		t.Fatalf("stored %s", resp.Kvs[0].Value)
	}

	// Taken is taken, whoever asks; out of range is refused.
	txn = a.Begin()
	if err := txn.Allocate(ctx, ip, ServiceRef("default", "other")); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("allocate a taken address: %v", err)
	}
	var notInRange *IPNotInRangeError
	if err := txn.Allocate(ctx, netip.MustParseAddr("10.0.0.15"), web); !errors.As(err, &notInRange) {
		t.Fatalf("broadcast address: %v", err)
	}
	if err := txn.Allocate(ctx, netip.MustParseAddr("10.1.0.1"), web); !errors.Is(err, ErrMismatchedNetwork) {
		t.Fatalf("other network: %v", err)
	}

	// A release by another parent leaves the address; the parent's frees it.
	txn = a.Begin()
	if err := txn.Release(ctx, ip, ServiceRef("default", "other")); err != nil || len(txn.Extra().Then) != 0 {
		t.Fatalf("release by another Service: %v %v", err, txn.Extra())
	}
	if err := txn.Release(ctx, ip, web); err != nil {
		t.Fatal(err)
	}
	if err := commitIPs(t, cli, txn); err != nil {
		t.Fatal(err)
	}
	if resp, _ := cli.Get(ctx, IPAddressesPrefix+"10.0.0.5"); len(resp.Kvs) != 0 {
		t.Fatal("release kept the IPAddress")
	}
}

// Two API servers: dynamic picks never hand out one address twice, a
// release decided from a stale read fails its condition, and a full range
// is only reported once etcd says so.
func TestAddressesTwoServers(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	a, b := startAddresses(t, cli, "10.0.0.0/28"), startAddresses(t, cli, "10.0.0.0/28")

	seen := map[netip.Addr]bool{}
	for k := range 14 {
		s := a
		if k%2 == 1 {
			s = b
		}
		for {
			txn := s.Begin()
			ip, err := txn.AllocateNext(ctx, "IPv4", ServiceRef("default", "s"))
			if err != nil {
				t.Fatalf("allocation %d: %v", k, err)
			}
			err = commitIPs(t, cli, txn)
			if errors.Is(err, storage.ErrExtraFailed) {
				continue // the other server took it first: pick again
			}
			if err != nil || seen[ip] {
				t.Fatalf("allocation %d: %s, %v", k, ip, err)
			}
			seen[ip] = true
			break
		}
	}
	// a may not yet see all of b's: its picks fail their condition until
	// it does, then the range is full.
	for k := 0; ; k++ {
		txn := a.Begin()
		ip, err := txn.AllocateNext(ctx, "IPv4", ServiceRef("default", "s"))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil || k == 14 {
			t.Fatalf("15th address: %s, %v", ip, err)
		}
		if err := commitIPs(t, cli, txn); !errors.Is(err, storage.ErrExtraFailed) {
			t.Fatalf("15th address %s: %v", ip, err)
		}
	}

	// b frees one address; a, before its cache shows it, finds it free.
	var freed netip.Addr
	for ip := range seen {
		freed = ip
		break
	}
	stale := b.Begin()
	if err := stale.Release(ctx, freed, ServiceRef("default", "s")); err != nil {
		t.Fatal(err)
	}
	txn := b.Begin()
	if err := txn.Release(ctx, freed, ServiceRef("default", "s")); err != nil || commitIPs(t, cli, txn) != nil {
		t.Fatal(err)
	}
	got, err := a.Begin().AllocateNext(ctx, "IPv4", ServiceRef("default", "again"))
	if err != nil || got != freed {
		t.Fatalf("after the release %s: got %s, %v", freed, got, err)
	}
	// Re-created meanwhile, the address is not released by a write
	// decided before.
	txn = a.Begin()
	if err := txn.Allocate(ctx, freed, ServiceRef("default", "s")); err != nil || commitIPs(t, cli, txn) != nil {
		t.Fatal(err)
	}
	if err := commitIPs(t, cli, stale); !errors.Is(err, storage.ErrExtraFailed) {
		t.Fatalf("stale release: %v", err)
	}
	waitTaken(t, b, freed, true)
}

// waitView waits until the bitmap view at key is want.
func waitView(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	within(t, func() string {
		resp, err := cli.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		got := "nothing"
		if len(resp.Kvs) == 1 {
			got = string(resp.Kvs[0].Value)
		}
		if got != want {
			return fmt.Sprintf("view %s: %s, want %s", key, got, want)
		}
		return ""
	})
}

// The RangeAllocation bitmaps are a view of the IPAddresses, written after
// they change, for each family of a dual-stack cluster.
func TestAddressesBitmapView(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	a := startAddresses(t, cli, "10.0.0.0/28,fd00::/120")
	// Both of a dual-stack Service's addresses commit at one revision.
	txn := a.Begin()
	if err := txn.Allocate(ctx, netip.MustParseAddr("10.0.0.3"), ServiceRef("default", "web")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Allocate(ctx, netip.MustParseAddr("fd00::5"), ServiceRef("default", "web")); err != nil || commitIPs(t, cli, txn) != nil {
		t.Fatal(err)
	}
	waitView(t, cli, ServiceIPsKey, `{"kind":"RangeAllocation","apiVersion":"v1","metadata":{},"range":"10.0.0.0/28","data":"BA=="}`)
	waitView(t, cli, SecondaryServiceIPsKey, `{"kind":"RangeAllocation","apiVersion":"v1","metadata":{},"range":"fd00::/120","data":"EA=="}`)
	// Written again only when it changed.
	resp, _ := cli.Get(ctx, ServiceIPsKey)
	if err := a.WriteView(ctx); err != nil {
		t.Fatal(err)
	}
	if again, _ := cli.Get(ctx, ServiceIPsKey); again.Kvs[0].ModRevision != resp.Kvs[0].ModRevision {
		t.Fatal("an unchanged view was written again")
	}
}

// putCIDR stores a ServiceCIDR as the API server would.
func putCIDR(t *testing.T, cli *clientv3.Client, sc *networkingv1.ServiceCIDR) {
	t.Helper()
	data, err := registry.JSONCodec{}.Encode(sc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(context.Background(), ServiceCIDRsPrefix+sc.Name, string(data)); err != nil {
		t.Fatal(err)
	}
}

// waitInRange waits until InRange(ip) answers as want says.
func waitInRange(t *testing.T, a *Addresses, ip netip.Addr, want bool) {
	t.Helper()
	within(t, func() string {
		if err := a.InRange(ip); (err == nil) != want {
			return fmt.Sprintf("%s in range: %v, want %v", ip, err, want)
		}
		return ""
	})
}

// A ServiceCIDR that is Ready (or has no condition yet) and is not being
// deleted adds its CIDRs to allocate from, once the flag range is full.
func TestAddressesFromServiceCIDRs(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	a := startAddresses(t, cli, "10.0.0.0/29")
	for range 6 {
		txn := a.Begin()
		if _, err := txn.AllocateNext(ctx, "IPv4", ServiceRef("default", "s")); err != nil || commitIPs(t, cli, txn) != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Begin().AllocateNext(ctx, "IPv4", ServiceRef("default", "s")); !errors.Is(err, ErrFull) {
		t.Fatalf("7th address of a /29: %v", err)
	}
	extra := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.1.0.0/29", "fd00::/120"}}}
	putCIDR(t, cli, extra)
	waitInRange(t, a, netip.MustParseAddr("10.1.0.3"), true)
	txn := a.Begin()
	ip, err := txn.AllocateNext(ctx, "IPv4", ServiceRef("default", "s"))
	if err != nil || !netip.MustParsePrefix("10.1.0.0/29").Contains(ip) || commitIPs(t, cli, txn) != nil {
		t.Fatalf("address once extra is there: %s, %v", ip, err)
	}
	// The IPAddress and ServiceCIDR watches are separate streams: let the
	// cache see the address before the ranges change under it.
	waitTaken(t, a, ip, true)
	// The IPv6 CIDR of a single-stack IPv4 cluster is not allocated.
	if err := a.InRange(netip.MustParseAddr("fd00::5")); !errors.Is(err, ErrMismatchedNetwork) {
		t.Fatalf("fd00::5: %v", err)
	}
	var notInRange *IPNotInRangeError
	if err := a.InRange(netip.MustParseAddr("10.1.0.7")); !errors.As(err, &notInRange) || notInRange.Range != "10.1.0.0/29" {
		t.Fatalf("broadcast address of extra: %v", err)
	}

	// Not Ready, or being deleted: no more addresses from it, though it
	// still covers what it gave.
	extra.Status.Conditions = []metav1.Condition{{Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionFalse}}
	putCIDR(t, cli, extra)
	waitInRange(t, a, netip.MustParseAddr("10.1.0.3"), false)
	if !a.Covers(ip) || a.Covers(netip.MustParseAddr("10.2.0.1")) {
		t.Fatalf("covers %s: %v", ip, a.Covers(ip))
	}
	extra.Status.Conditions = nil
	putCIDR(t, cli, extra)
	waitInRange(t, a, netip.MustParseAddr("10.1.0.3"), true)
	extra.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	putCIDR(t, cli, extra)
	waitInRange(t, a, netip.MustParseAddr("10.1.0.3"), false)
	if _, err := cli.Delete(ctx, ServiceCIDRsPrefix+"extra"); err != nil {
		t.Fatal(err)
	}
	extra.DeletionTimestamp = nil
	putCIDR(t, cli, extra)
	waitInRange(t, a, netip.MustParseAddr("10.1.0.3"), true)
	// A new range starts from the addresses already taken in it.
	txn = a.Begin()
	if err := txn.Allocate(ctx, ip, ServiceRef("default", "other")); !errors.Is(err, ErrIPAllocated) {
		t.Fatalf("%s again: %v", ip, err)
	}
	a.mu.Lock()
	taken := a.taken[1].Has(mustIndex(t, a.ranges[1], ip))
	a.mu.Unlock()
	if !taken {
		t.Fatalf("the re-added range lost %s", ip)
	}
}

func mustIndex(t *testing.T, r *IPRange, ip netip.Addr) int {
	t.Helper()
	i, err := r.Index(ip)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
