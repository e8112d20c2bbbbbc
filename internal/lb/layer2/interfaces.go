package layer2

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// eligibility is what a link offers: ARP (a broadcast link with an IPv4
// address) and NDP (a link with an IPv6 link-local address).
type eligibility struct{ arp, ndp bool }

// eligible applies MetalLB's rules to a link: it is up, not a bridge's or
// bond's port, not NOARP, and not excluded by name.
func (a *Announcer) eligible(ifi net.Interface) (eligibility, error) {
	if a.cfg.Exclude.MatchString(ifi.Name) || ifi.Flags&net.FlagUp == 0 {
		return eligibility{}, nil
	}
	link, err := netlink.LinkByIndex(ifi.Index)
	if err != nil {
		return eligibility{}, fmt.Errorf("link %s: %w", ifi.Name, err)
	}
	if link.Attrs().MasterIndex != 0 || link.Attrs().RawFlags&unix.IFF_NOARP != 0 {
		return eligibility{}, nil
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return eligibility{}, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	var e eligibility
	for _, addr := range addrs {
		switch {
		case addr.IP.To4() != nil:
			e.arp = ifi.Flags&net.FlagBroadcast != 0
		case addr.IP.IsLinkLocalUnicast() && addr.Flags&unix.IFA_F_TENTATIVE == 0:
			e.ndp = true
		}
	}
	return e, nil
}

// scan opens responders on the namespace's eligible links and closes
// those of links gone or no longer eligible.
func (a *Announcer) scan() {
	a.mu.Lock()
	defer a.mu.Unlock()
	err := netns.Do(a.cfg.NetNS, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("list interfaces: %w", err)
		}
		keepARP, keepNDP := map[int]bool{}, map[int]bool{}
		var names []string
		for _, ifi := range ifs {
			e, err := a.eligible(ifi)
			if err != nil {
				a.log.Warn("layer 2 interface", "interface", ifi.Name, "err", err)
				continue
			}
			if e.arp || e.ndp {
				names = append(names, ifi.Name)
			}
			keepARP[ifi.Index], keepNDP[ifi.Index] = e.arp, e.ndp
			if e.arp && a.arps[ifi.Index] == nil {
				r, err := dialARP(ifi, a.answers)
				if err != nil {
					a.log.Warn("ARP responder", "interface", ifi.Name, "err", err)
				} else {
					a.arps[ifi.Index] = r
					a.responders.Go(func() { r.run(a.log) })
					a.log.Info("ARP responder created", "interface", ifi.Name)
				}
			}
			if e.ndp && a.ndps[ifi.Index] == nil {
				r, err := dialNDP(ifi, a.answers)
				if err != nil {
					a.log.Warn("NDP responder", "interface", ifi.Name, "err", err)
				} else {
					for ip := range a.ads {
						if ip.Is6() {
							r.watch(ip)
						}
					}
					a.ndps[ifi.Index] = r
					a.responders.Go(func() { r.run(a.log) })
					a.log.Info("NDP responder created", "interface", ifi.Name)
				}
			}
		}
		a.interfaces = names
		for i, r := range a.arps {
			if !keepARP[i] {
				r.close()
				delete(a.arps, i)
				a.log.Info("ARP responder deleted", "interface", r.name)
			}
		}
		for i, r := range a.ndps {
			if !keepNDP[i] {
				r.close()
				delete(a.ndps, i)
				a.log.Info("NDP responder deleted", "interface", r.name)
			}
		}
		return nil
	})
	if err != nil {
		a.log.Warn("layer 2 interfaces", "err", err)
	}
}
