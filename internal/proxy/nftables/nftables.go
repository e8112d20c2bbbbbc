// Package nftables is the proxy's nftables backend, modelled on
// kube-proxy's nftables mode: one table "svcnet" per IP family, verdict
// maps keyed by destination address, protocol and port that dispatch to a
// chain per Service port, a random choice of endpoint chain with numgen,
// masquerade by mark, reject for Services without endpoints. It talks
// netlink to the kernel (no nft binary) inside the node's network
// namespace, and every sync is one netlink batch: a partial sync rewrites
// only the chains and map elements of the Services that changed.
// ReadFrontends reads the table back from the kernel: which Service each
// frontend belongs to and where its rules send it.
package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/proxy"
)

// TableName is the proxy's table in both families.
const TableName = "svcnet"

// Config places the backend.
type Config struct {
	// NetNS is the path of the node's network namespace; empty means the
	// process's own.
	NetNS string
	// PodCIDRs are the node's pod CIDRs (one per family).
	PodCIDRs []netip.Prefix
	// NodeIPs are the node's addresses.
	NodeIPs []netip.Addr
	// ServiceCIDRs are the Service ranges: traffic to an address of theirs
	// that no Service holds is dropped.
	ServiceCIDRs []netip.Prefix
	// Logger logs for the backend (default: slog's).
	Logger *slog.Logger
}

// Backend programs nftables. It is used from one goroutine (the sync
// loop).
type Backend struct {
	netns        string
	node         node
	serviceCIDRs []netip.Prefix
	state        map[string]*familyState
	ct           *conntrack
}

// familyState is what the last successful sync left in one family's table.
type familyState struct {
	services map[types.NamespacedName]*fragment
	counts   map[types.NamespacedName]counts
}

// New prepares a backend for the namespace: it sets kube-proxy's TCP
// conntrack timeouts (setConntrackTimeouts), lets bridged pod traffic
// pass conntrack (br_netfilter's bridge-nf-call-iptables), so that replies
// from a pod on the same bridge are un-DNATed; where the kernel lacks
// br_netfilter every cluster IP connection is masqueraded instead.
func New(c Config) (*Backend, error) {
	b := &Backend{netns: c.NetNS, node: node{podCIDRs: c.PodCIDRs, ips: c.NodeIPs}, serviceCIDRs: c.ServiceCIDRs, state: map[string]*familyState{}}
	err := netns.Do(c.NetNS, func() error {
		if err := setConntrackTimeouts(); err != nil {
			return err
		}
		for _, f := range []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables"} {
			p := filepath.Join("/proc/sys/net/bridge", f)
			if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					b.node.masqueradeAll = true
					return nil
				}
				return fmt.Errorf("enable %s: %w", p, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b.node.masqueradeAll {
		log := c.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("the kernel has no br_netfilter: bridged pod traffic does not pass conntrack, so every cluster IP connection is masqueraded")
	}
	ct, err := newConntrack(c.NetNS)
	if err != nil {
		return nil, err
	}
	b.ct = ct
	return b, nil
}

// bigBuffers lets one batch (all of a full sync) and its acknowledgements
// through the netlink socket, as nft does for large rulesets: the kernel
// takes a batch in one message no larger than the send buffer.
func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, 1<<29); e != nil {
				serr = errors.Join(serr, e)
			}
		}
	})
	return errors.Join(err, serr)
}

// conn opens an nftables connection into the node's namespace, with more
// options.
func (b *Backend) conn(opts ...nftables.ConnOption) (*nftables.Conn, func(), error) {
	opts = append(opts, nftables.WithSockOptions(bigBuffers))
	if b.netns == "" {
		c, err := nftables.New(opts...)
		return c, func() {}, err
	}
	ns, err := vnetns.GetFromPath(b.netns)
	if err != nil {
		return nil, nil, fmt.Errorf("open network namespace %s: %w", b.netns, err)
	}
	c, err := nftables.New(append(opts, nftables.WithNetNSFd(int(ns)))...)
	if err != nil {
		ns.Close()
		return nil, nil, fmt.Errorf("nftables in %s: %w", b.netns, err)
	}
	return c, func() { ns.Close() }, nil
}

// Sync applies u in one netlink batch.
func (b *Backend) Sync(_ context.Context, u proxy.Update) (proxy.Stats, error) {
	conn, done, err := b.conn()
	if err != nil {
		return proxy.Stats{}, err
	}
	defer done()
	next := map[string]*familyState{}
	for _, f := range families {
		st := b.state[f.name]
		if u.Full || st == nil {
			if next[f.name], err = b.full(conn, f, u.Services); err != nil {
				return proxy.Stats{}, err
			}
		} else {
			if next[f.name], err = b.partial(conn, f, st, u.Changed); err != nil {
				return proxy.Stats{}, err
			}
		}
	}
	if err := conn.Flush(); err != nil {
		// Forget what we believed: the next (full) sync starts from the kernel.
		clear(b.state)
		return proxy.Stats{}, fmt.Errorf("apply nftables batch: %w", err)
	}
	b.state = next
	if err := b.ct.cleanStale(u); err != nil {
		return b.stats(), fmt.Errorf("clear stale conntrack entries: %w", err)
	}
	return b.stats(), nil
}

func (b *Backend) stats() proxy.Stats {
	st := proxy.Stats{Objects: map[string]int{}, NoLocalEndpoints: map[string]int{}}
	for _, f := range families {
		fs := b.state[f.name]
		sk := skeleton(f, b.serviceCIDRs)
		frs := append([]*fragment{sk}, slices.Collect(maps.Values(fs.services))...)
		for _, fr := range frs {
			st.Objects["chains"] += len(fr.chains)
			st.Objects["elements"] += len(fr.elems)
			for _, c := range fr.chains {
				st.Objects["rules"] += len(c.rules)
			}
		}
		for _, c := range fs.counts {
			st.NoLocalEndpoints["internal"] += c.noLocalInternal
			st.NoLocalEndpoints["external"] += c.noLocalExternal
		}
	}
	return st
}

func (b *Backend) render(f family, services map[types.NamespacedName]*proxy.Service) *familyState {
	st := &familyState{services: map[types.NamespacedName]*fragment{}, counts: map[types.NamespacedName]counts{}}
	for name, svc := range services {
		var c counts
		st.services[name] = renderService(f, b.node, svc, &c)
		st.counts[name] = c
	}
	return st
}

// full rewrites the family's table: every chain flushed and refilled,
// stale chains and sets deleted, maps refilled. Affinity sets that stay
// keep their entries.
func (b *Backend) full(conn *nftables.Conn, f family, services map[types.NamespacedName]*proxy.Service) (*familyState, error) {
	table := &nftables.Table{Name: TableName, Family: f.table}
	st := b.render(f, services)
	desired := append([]*fragment{skeleton(f, b.serviceCIDRs)}, slices.Collect(maps.Values(st.services))...)
	wantChains, wantSets := map[string]bool{}, map[string]*set{}
	p := &plan{}
	for _, fr := range desired {
		for _, c := range fr.chains {
			wantChains[c.name] = true
			p.write = append(p.write, c)
		}
		for _, s := range fr.sets {
			wantSets[s.name] = s
		}
		p.addElems = append(p.addElems, fr.elems...)
	}
	chains, sets, err := existing(conn, table)
	if err != nil {
		return nil, err
	}
	for _, c := range chains {
		p.flush = append(p.flush, c)
		if !wantChains[c] {
			p.delChains = append(p.delChains, c)
		}
	}
	for _, s := range sets {
		w := wantSets[s.Name]
		switch {
		case w == nil || w.timeout != s.Timeout:
			p.delSets = append(p.delSets, s.Name)
		case w.timeout == 0:
			p.flushSets = append(p.flushSets, s.Name)
		}
	}
	for _, s := range wantSets {
		p.addSets = append(p.addSets, s)
	}
	conn.AddTable(table)
	return st, p.apply(conn, table, f)
}

// existing lists the chains and named sets of the table in the kernel.
func existing(conn *nftables.Conn, table *nftables.Table) ([]string, []*nftables.Set, error) {
	all, err := conn.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return nil, nil, fmt.Errorf("list chains: %w", err)
	}
	var chains []string
	for _, c := range all {
		if c.Table.Name == table.Name {
			chains = append(chains, c.Name)
		}
	}
	if len(chains) == 0 {
		return nil, nil, nil // no table yet (sets cannot be listed then)
	}
	sets, err := conn.GetSets(table)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, nil, fmt.Errorf("list sets: %w", err)
	}
	var named []*nftables.Set
	for _, s := range sets {
		if !s.Anonymous {
			named = append(named, s)
		}
	}
	return chains, named, nil
}

// partial rewrites what the changed Services own.
func (b *Backend) partial(conn *nftables.Conn, f family, st *familyState, changed map[types.NamespacedName]proxy.Change) (*familyState, error) {
	next := &familyState{services: maps.Clone(st.services), counts: maps.Clone(st.counts)}
	p := &plan{}
	for name, ch := range changed {
		old := st.services[name]
		var cur *fragment
		if ch.Current != nil {
			var c counts
			cur = renderService(f, b.node, ch.Current, &c)
			next.services[name], next.counts[name] = cur, c
		} else {
			delete(next.services, name)
			delete(next.counts, name)
		}
		p.diff(old, cur)
	}
	return next, p.apply(conn, &nftables.Table{Name: TableName, Family: f.table}, f)
}

// plan is one batch's operations in the order the kernel needs them:
// references go before what they point to is deleted, and what they point
// to exists before they are added.
type plan struct {
	delElems  []element
	flush     []string
	flushSets []string
	delSets   []string
	delChains []string
	addSets   []*set
	// write adds the chains (a no-op for existing ones) and their rules.
	write    []*chain
	addElems []element
}

// diff plans the change from one Service's old fragment to its new one
// (either may be nil).
func (p *plan) diff(old, cur *fragment) {
	if old == nil {
		old = &fragment{}
	}
	if cur == nil {
		cur = &fragment{}
	}
	oldElems := map[string]element{}
	for _, e := range old.elems {
		oldElems[e.id()] = e
	}
	curElems := map[string]element{}
	for _, e := range cur.elems {
		curElems[e.id()] = e
	}
	for id, e := range oldElems {
		if c, ok := curElems[id]; !ok || c.verdict != e.verdict || c.comment != e.comment {
			p.delElems = append(p.delElems, e)
		}
	}
	for id, e := range curElems {
		if o, ok := oldElems[id]; !ok || o.verdict != e.verdict || o.comment != e.comment {
			p.addElems = append(p.addElems, e)
		}
	}
	oldChains := map[string]*chain{}
	for _, c := range old.chains {
		oldChains[c.name] = c
	}
	curChains := map[string]bool{}
	for _, c := range cur.chains {
		curChains[c.name] = true
		o := oldChains[c.name]
		switch {
		case o == nil:
			p.write = append(p.write, c)
		case !sameRules(o, c):
			p.flush = append(p.flush, c.name)
			p.write = append(p.write, c)
		}
	}
	for name := range oldChains {
		if !curChains[name] {
			p.flush = append(p.flush, name)
			p.delChains = append(p.delChains, name)
		}
	}
	oldSets := map[string]*set{}
	for _, s := range old.sets {
		oldSets[s.name] = s
	}
	curSets := map[string]bool{}
	for _, s := range cur.sets {
		curSets[s.name] = true
		if o := oldSets[s.name]; o == nil || o.timeout != s.timeout {
			if o != nil {
				p.delSets = append(p.delSets, s.name)
			}
			p.addSets = append(p.addSets, s)
		}
	}
	for name := range oldSets {
		if !curSets[name] {
			p.delSets = append(p.delSets, name)
		}
	}
}

func sameRules(a, b *chain) bool {
	return slices.EqualFunc(a.rules, b.rules, func(x, y *rule) bool { return x.String() == y.String() })
}

// nfSet is the kernel's view of one of our sets.
func nfSet(t *nftables.Table, f family, s *set) *nftables.Set {
	ns := &nftables.Set{Table: t, Name: s.name, IsMap: s.isMap}
	if len(s.key) > 1 {
		ns.KeyType, ns.Concatenation = nftables.MustConcatSetType(s.key...), true
	} else {
		ns.KeyType = s.key[0]
	}
	if s.isMap {
		ns.DataType = nftables.TypeVerdict
	}
	if s.timeout > 0 {
		ns.HasTimeout, ns.Timeout, ns.Dynamic = true, s.timeout, true
	}
	return ns
}

func (p *plan) apply(conn *nftables.Conn, t *nftables.Table, f family) error {
	vmaps := map[string]*set{}
	for _, s := range skeleton(f, nil).sets {
		vmaps[s.name] = s
	}
	var errs []error
	elems := func(list []element, op func(*nftables.Set, []nftables.SetElement) error) {
		bySet := map[string][]nftables.SetElement{}
		for _, e := range list {
			el := nftables.SetElement{Key: e.key, Comment: e.comment}
			if vmaps[e.set].isMap {
				v := e.verdict
				el.VerdictData = &v
			}
			bySet[e.set] = append(bySet[e.set], el)
		}
		for name, list := range bySet {
			// A message's element list is one netlink attribute, whose
			// length has 16 bits: send the elements in chunks.
			for chunk := range slices.Chunk(list, 256) {
				if err := op(nfSet(t, f, vmaps[name]), chunk); err != nil {
					errs = append(errs, fmt.Errorf("elements of %s: %w", name, err))
				}
			}
		}
	}
	elems(p.delElems, conn.SetDeleteElements)
	for _, c := range p.flush {
		conn.FlushChain(&nftables.Chain{Table: t, Name: c})
	}
	for _, s := range p.flushSets {
		conn.FlushSet(&nftables.Set{Table: t, Name: s})
	}
	for _, s := range p.delSets {
		conn.DelSet(&nftables.Set{Table: t, Name: s})
	}
	for _, c := range p.delChains {
		conn.DelChain(&nftables.Chain{Table: t, Name: c})
	}
	for _, s := range p.addSets {
		if err := conn.AddSet(nfSet(t, f, s), nil); err != nil {
			errs = append(errs, fmt.Errorf("set %s: %w", s.name, err))
		}
	}
	chains := make([]*nftables.Chain, len(p.write))
	for i, c := range p.write {
		ch := &nftables.Chain{Table: t, Name: c.name}
		if c.base != nil {
			prio := nftables.ChainPriority(c.base.priority)
			ch.Type, ch.Hooknum, ch.Priority = c.base.typ, c.base.hook, &prio
		}
		chains[i] = conn.AddChain(ch)
	}
	for i, c := range p.write {
		for _, r := range c.rules {
			conn.AddRule(&nftables.Rule{Table: t, Chain: chains[i], Exprs: r.exprs})
		}
	}
	elems(p.addElems, conn.SetAddElements)
	return errors.Join(errs...)
}

// Cleanup deletes the proxy's tables.
func (b *Backend) Cleanup() error {
	return Cleanup(b.netns)
}

// Cleanup deletes the proxy's tables in the namespace at path (empty: the
// process's own), what `svcnet node --cleanup` does.
func Cleanup(netnsPath string) error {
	b := &Backend{netns: netnsPath}
	conn, done, err := b.conn()
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, f := range families {
		tables, err := conn.ListTablesOfFamily(f.table)
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s tables: %w", f.name, err))
			continue
		}
		for _, t := range tables {
			if t.Name == TableName {
				conn.DelTable(t)
			}
		}
	}
	if err := conn.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("delete tables: %w", err))
	}
	return errors.Join(errs...)
}
