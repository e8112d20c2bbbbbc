package layer2

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// arpResponder answers ARP requests for the announced IPv4 addresses on
// one interface.
type arpResponder struct {
	name    string
	mac     net.HardwareAddr
	conn    *arp.Client
	answers func(netip.Addr, string) bool
	closed  chan struct{}
}

// dialARP opens the interface's ARP socket; it must run inside the
// interface's network namespace.
func dialARP(ifi net.Interface, answers func(netip.Addr, string) bool) (*arpResponder, error) {
	conn, err := arp.Dial(&ifi)
	if err != nil {
		return nil, fmt.Errorf("ARP socket on %s: %w", ifi.Name, err)
	}
	return &arpResponder{name: ifi.Name, mac: ifi.HardwareAddr, conn: conn, answers: answers, closed: make(chan struct{})}, nil
}

// run answers requests until the socket is closed.
func (r *arpResponder) run(log *slog.Logger) {
	for {
		pkt, eth, err := r.conn.Read()
		if err != nil {
			select {
			case <-r.closed:
				return
			default:
			}
			log.Warn("read ARP", "interface", r.name, "err", err)
			continue
		}
		// Requests only, broadcast or sent to this interface.
		if pkt.Operation != arp.OperationRequest ||
			!bytes.Equal(eth.Destination, ethernet.Broadcast) && !bytes.Equal(eth.Destination, r.mac) {
			continue
		}
		if !r.answers(pkt.TargetIP, r.name) {
			continue
		}
		if err := r.conn.Reply(pkt, r.mac, pkt.TargetIP); err != nil {
			log.Warn("ARP reply", "interface", r.name, "ip", pkt.TargetIP, "to", pkt.SenderIP, "err", err)
		}
	}
}

// gratuitous broadcasts ip as this interface's, as a request and as a
// reply (neighbours heed one or the other).
func (r *arpResponder) gratuitous(ip netip.Addr) error {
	for _, op := range []arp.Operation{arp.OperationRequest, arp.OperationReply} {
		pkt, err := arp.NewPacket(op, r.mac, ip, ethernet.Broadcast, ip)
		if err != nil {
			return fmt.Errorf("gratuitous ARP packet for %s: %w", ip, err)
		}
		if err := r.conn.WriteTo(pkt, ethernet.Broadcast); err != nil {
			return fmt.Errorf("send gratuitous ARP for %s: %w", ip, err)
		}
	}
	return nil
}

func (r *arpResponder) close() {
	close(r.closed)
	_ = r.conn.Close()
}
