package layer2

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/mdlayher/ndp"
)

// ndpResponder answers neighbor solicitations for the announced IPv6
// addresses on one interface. It joins each address's solicited-node
// multicast group, where solicitations are sent.
type ndpResponder struct {
	name    string
	mac     net.HardwareAddr
	conn    *ndp.Conn
	answers func(netip.Addr, string) bool
	closed  chan struct{}
	// groups counts the announced addresses of each group (two
	// addresses may share one); the announcer's lock guards it.
	groups map[netip.Addr]int
	log    *slog.Logger
}

// dialNDP opens the interface's ICMPv6 socket on its link-local address;
// it must run inside the interface's network namespace.
func dialNDP(ifi net.Interface, answers func(netip.Addr, string) bool) (*ndpResponder, error) {
	conn, _, err := ndp.Listen(&ifi, ndp.LinkLocal)
	if err != nil {
		return nil, fmt.Errorf("NDP socket on %s: %w", ifi.Name, err)
	}
	return &ndpResponder{name: ifi.Name, mac: ifi.HardwareAddr, conn: conn, answers: answers, closed: make(chan struct{}),
		groups: map[netip.Addr]int{}, log: slog.Default()}, nil
}

// run answers solicitations until the socket is closed.
func (r *ndpResponder) run(log *slog.Logger) {
	r.log = log
	for {
		msg, _, src, err := r.conn.ReadFrom()
		if err != nil {
			select {
			case <-r.closed:
				return
			default:
			}
			log.Warn("read NDP", "interface", r.name, "err", err)
			continue
		}
		ns, ok := msg.(*ndp.NeighborSolicitation)
		if !ok || !hasSourceLinkLayer(ns) || !r.answers(ns.TargetAddress, r.name) {
			continue
		}
		if err := r.advertise(src, ns.TargetAddress, false); err != nil {
			log.Warn("neighbor advertisement", "interface", r.name, "ip", ns.TargetAddress, "to", src, "err", err)
		}
	}
}

// hasSourceLinkLayer says whether a solicitation says where to answer (a
// duplicate address probe, from ::, does not).
func hasSourceLinkLayer(ns *ndp.NeighborSolicitation) bool {
	for _, o := range ns.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Source {
			return true
		}
	}
	return false
}

// advertise sends a neighbor advertisement of target with this
// interface's MAC: solicited to one asker, or unsolicited, overriding
// what neighbours hold, to all nodes.
func (r *ndpResponder) advertise(dst, target netip.Addr, unsolicited bool) error {
	na := &ndp.NeighborAdvertisement{
		Solicited:     !unsolicited,
		Override:      unsolicited,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: r.mac}},
	}
	return r.conn.WriteTo(na, nil, dst)
}

// gratuitous tells all nodes on the link that ip is this interface's.
func (r *ndpResponder) gratuitous(ip netip.Addr) error {
	if err := r.advertise(netip.IPv6LinkLocalAllNodes(), ip, true); err != nil {
		return fmt.Errorf("unsolicited neighbor advertisement for %s: %w", ip, err)
	}
	return nil
}

// watch joins ip's solicited-node group.
func (r *ndpResponder) watch(ip netip.Addr) {
	group, err := ndp.SolicitedNodeMulticast(ip)
	if err != nil {
		r.log.Warn("solicited-node group", "ip", ip, "err", err)
		return
	}
	if r.groups[group] == 0 {
		if err := r.conn.JoinGroup(group); err != nil {
			r.log.Warn("join solicited-node group", "interface", r.name, "ip", ip, "err", err)
			return
		}
	}
	r.groups[group]++
}

// unwatch leaves ip's solicited-node group once no announced address
// needs it.
func (r *ndpResponder) unwatch(ip netip.Addr) {
	group, err := ndp.SolicitedNodeMulticast(ip)
	if err != nil || r.groups[group] == 0 {
		return
	}
	r.groups[group]--
	if r.groups[group] == 0 {
		delete(r.groups, group)
		if err := r.conn.LeaveGroup(group); err != nil {
			r.log.Warn("leave solicited-node group", "interface", r.name, "ip", ip, "err", err)
		}
	}
}

func (r *ndpResponder) close() {
	close(r.closed)
	_ = r.conn.Close()
}
