// Package layer2 makes a node answer for LoadBalancer IPs on its links, as
// MetalLB's speaker does in layer 2 mode: ARP replies for IPv4 addresses,
// neighbor advertisements for IPv6 ones, from the node's own MAC address,
// so that the LAN sends the IP's traffic to the node, where the Service
// proxy takes it. Taking an IP over is said out loud (gratuitous ARP,
// unsolicited neighbor advertisements, for five seconds), so that neighbours
// drop the previous holder's MAC at once.
//
// The responders are raw sockets (AF_PACKET for ARP, ICMPv6 for NDP)
// opened inside the node's network namespace, one per eligible interface,
// kept in step with the namespace's links by a periodic scan. Which IPs to
// answer for, and where, is the caller's choice (internal/lb/speaker).
package layer2

import (
	"context"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Advertisement is one IP to answer for.
type Advertisement struct {
	IP netip.Addr
	// Interfaces limit where it is answered for (an L2Advertisement's
	// spec.interfaces); empty is every eligible interface.
	Interfaces []string
}

// matches says whether the advertisement is answered on interface name.
func (a Advertisement) matches(name string) bool {
	return len(a.Interfaces) == 0 || slices.Contains(a.Interfaces, name)
}

// DefaultExclude are the interfaces never answered on: MetalLB's default
// announcedInterfacesToExclude (container bridges, veths, loopback,
// tunnels) and svcnet's pod bridge, svcnet0, the cni0 of this cluster.
var DefaultExclude = regexp.MustCompile(`^(docker.*|cbr.*|dummy.*|virbr.*|lxcbr.*|veth.*|lo|cali.*|tunl.*|flannel.*|kube-ipvs.*|cni.*|nodelocaldns.*|lxc.*|svcnet0)$`)

// Config configures an Announcer.
type Config struct {
	// NetNS is the path of the node's network namespace (empty: the
	// process's own).
	NetNS string
	// Exclude matches the names of interfaces never answered on
	// (default DefaultExclude).
	Exclude *regexp.Regexp
	// ScanInterval is how often the namespace's links are looked at again
	// (default 10s, MetalLB's).
	ScanInterval time.Duration
	Logger       *slog.Logger
}

// Gratuitous announcements of a takeover repeat every gratuitousInterval
// for gratuitousFor, as MetalLB's.
const (
	gratuitousInterval = 1100 * time.Millisecond
	gratuitousFor      = 5 * time.Second
)

// Announcer answers for a set of IPs on the eligible interfaces of a
// network namespace. Run owns its sockets; Set changes the set at any
// time.
type Announcer struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}

	mu         sync.RWMutex
	ads        map[netip.Addr]Advertisement
	interfaces []string
	arps       map[int]*arpResponder
	ndps       map[int]*ndpResponder
	// loud are the IPs being announced gratuitously, until when.
	loud map[netip.Addr]time.Time
	// responders are the goroutines reading the sockets.
	responders sync.WaitGroup
}

// New makes an Announcer for cfg; it answers once Run runs.
func New(cfg Config) *Announcer {
	if cfg.Exclude == nil {
		cfg.Exclude = DefaultExclude
	}
	if cfg.ScanInterval == 0 {
		cfg.ScanInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Announcer{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1),
		ads: map[netip.Addr]Advertisement{}, arps: map[int]*arpResponder{}, ndps: map[int]*ndpResponder{},
		loud: map[netip.Addr]time.Time{}}
}

// Run answers until ctx ends, then closes every socket and waits for
// their readers.
func (a *Announcer) Run(ctx context.Context) {
	scan := time.NewTicker(a.cfg.ScanInterval)
	defer scan.Stop()
	loud := time.NewTimer(0)
	defer loud.Stop()
	a.scan()
	for {
		select {
		case <-ctx.Done():
			a.closeAll()
			return
		case <-scan.C:
			a.scan()
		case <-a.wake:
			a.scan() // an IP's interfaces may have just appeared
			loud.Reset(0)
		case <-loud.C:
			if a.gratuitous(time.Now()) {
				loud.Reset(gratuitousInterval)
			}
		}
	}
}

// Set makes ads the IPs answered for. An IP new to the set, or whose
// interfaces changed, is announced gratuitously.
func (a *Announcer) Set(ads []Advertisement) {
	want := map[netip.Addr]Advertisement{}
	for _, ad := range ads {
		want[ad.IP] = ad
	}
	a.mu.Lock()
	changed := false
	for ip, ad := range want {
		old, had := a.ads[ip]
		if had && slices.Equal(old.Interfaces, ad.Interfaces) {
			continue
		}
		changed = true
		a.loud[ip] = time.Now().Add(gratuitousFor)
		if !had && ip.Is6() {
			for _, r := range a.ndps {
				r.watch(ip)
			}
		}
	}
	for ip := range a.ads {
		if _, ok := want[ip]; ok {
			continue
		}
		delete(a.loud, ip)
		if ip.Is6() {
			for _, r := range a.ndps {
				r.unwatch(ip)
			}
		}
	}
	a.ads = want
	a.mu.Unlock()
	if changed {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// Interfaces are the names of the interfaces answered on, as of the last
// scan.
func (a *Announcer) Interfaces() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.interfaces)
}

// answers says whether ip is answered for on interface name.
func (a *Announcer) answers(ip netip.Addr, name string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	ad, ok := a.ads[ip]
	return ok && ad.matches(name)
}

// gratuitous announces the loud IPs on their interfaces, forgetting those
// whose time is up; it says whether any remain.
func (a *Announcer) gratuitous(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip, until := range a.loud {
		if now.After(until) {
			delete(a.loud, ip)
			continue
		}
		ad := a.ads[ip]
		if ip.Is4() {
			for _, r := range a.arps {
				if ad.matches(r.name) {
					if err := r.gratuitous(ip); err != nil {
						a.log.Warn("gratuitous ARP", "interface", r.name, "ip", ip, "err", err)
					}
				}
			}
			continue
		}
		for _, r := range a.ndps {
			if ad.matches(r.name) {
				if err := r.gratuitous(ip); err != nil {
					a.log.Warn("unsolicited neighbor advertisement", "interface", r.name, "ip", ip, "err", err)
				}
			}
		}
	}
	return len(a.loud) > 0
}

// closeAll closes every responder and waits for their readers.
func (a *Announcer) closeAll() {
	a.mu.Lock()
	for i, r := range a.arps {
		r.close()
		delete(a.arps, i)
	}
	for i, r := range a.ndps {
		r.close()
		delete(a.ndps, i)
	}
	a.mu.Unlock()
	a.responders.Wait()
}
