package builtin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// boomServer plays upstream's e2e image regression-issue-74839, the
// server of the conntrack test for kubernetes/kubernetes#74839: conntrack
// marks a segment whose sequence number lies outside the window INVALID,
// and a proxy that lets such a segment through without undoing its NAT
// hands the client a segment from the pod's own address, which the client
// does not know and answers with a reset.
//
// It accepts TCP connections on port 9000 and closes each after ten
// seconds. Meanwhile a raw socket on each of the pod's addresses (POD_IPS,
// comma separated, else POD_IP) watches the segments sent to that port:
// once a client's ACK completes a handshake it logs "connection
// established" and sends the client a segment carrying "boom!!!" whose
// sequence number is far behind the window ("boom packet injected"). A
// reset arriving on the port is logged as "ERROR: RST received", which
// is what the e2e test looks for to fail. The raw sockets need NET_RAW,
// as the image's pod asks.
func boomServer(ctx context.Context) error {
	ips, err := boomPodIPs()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, ip := range ips {
		w, err := newBoomWatcher(ip, boomPort)
		if err != nil {
			return err
		}
		log.Printf("probing %s", ip)
		wg.Go(func() { w.run(ctx) })
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(boomPort)))
	if err != nil {
		return fmt.Errorf("listen on port %d: %w", boomPort, err)
	}
	log.Printf("listen on %s", ln.Addr())
	ready()
	return holdConnections(ctx, ln, &wg)
}

// boomPort is the port the boom server serves and watches.
var boomPort uint16 = 9000

// boomHold is how long the boom server keeps a connection open.
var boomHold = 10 * time.Second

// boomSeqBehind is how far behind the client's expected sequence number
// the injected segment starts: well outside any receive window.
const boomSeqBehind = 100000

// boomPayload is the data of the injected segment.
const boomPayload = "boom!!!"

// boomPodIPs reads the pod's addresses from POD_IPS, else POD_IP.
func boomPodIPs() ([]net.IP, error) {
	list := os.Getenv("POD_IPS")
	if list == "" {
		list = os.Getenv("POD_IP")
	}
	var ips []net.IP
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("pod IP %q: not an IP address", s)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 0 {
		return nil, errors.New("no pod IP: neither POD_IPS nor POD_IP is set")
	}
	return ips, nil
}

// holdConnections accepts connections on ln until ctx ends, closing each
// after boomHold (or when ctx ends); wg tracks the goroutines that hold
// them.
func holdConnections(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) error {
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { holdThenClose(ctx, c) })
	}
}

// holdThenClose closes c after boomHold, or sooner if ctx ends.
func holdThenClose(ctx context.Context, c net.Conn) {
	defer c.Close()
	sleepCtx(ctx, boomHold)
}

// boomWatcher watches, on a raw socket bound to one of the pod's
// addresses, the TCP segments sent to port, and injects the bad segment
// into each handshake it sees complete.
type boomWatcher struct {
	conn  *net.IPConn
	local net.IP
	port  uint16
	// pending maps a client's ip:port whose SYN was seen to the
	// acknowledgment number the server's side expects next (its
	// sequence number plus one).
	pending map[string]uint32
}

// newBoomWatcher opens a raw TCP socket on ip.
func newBoomWatcher(ip net.IP, port uint16) (*boomWatcher, error) {
	network := "ip6:tcp"
	if ip.To4() != nil {
		network = "ip4:tcp"
	}
	conn, err := net.ListenIP(network, &net.IPAddr{IP: ip})
	if err != nil {
		return nil, fmt.Errorf("raw TCP socket on %s: %w", ip, err)
	}
	return &boomWatcher{conn: conn, local: ip, port: port, pending: map[string]uint32{}}, nil
}

// run reads segments until ctx ends, which closes the socket.
func (w *boomWatcher) run(ctx context.Context) {
	defer w.conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = w.conn.Close() })
	defer stop()
	buf := make([]byte, 65536)
	for {
		n, from, err := w.conn.ReadFromIP(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			log.Printf("read TCP segment on %s: %v", w.local, err)
			continue
		}
		w.handle(buf[:n], from)
	}
}

// handle follows the handshakes to the watched port: it remembers each
// client's SYN, reports resets, and injects the bad segment when the
// client's ACK completes the handshake.
func (w *boomWatcher) handle(b []byte, from *net.IPAddr) {
	seg, _, err := decodeTCP(b)
	if err != nil {
		log.Printf("segment from %s: %v", from, err)
		return
	}
	if seg.DstPort != w.port {
		return
	}
	client := net.JoinHostPort(from.String(), strconv.Itoa(int(seg.SrcPort)))
	if seg.Flags&tcpSYN != 0 {
		w.pending[client] = seg.Seq + 1
		return
	}
	if seg.Flags&tcpRST != 0 {
		log.Println("ERROR: RST received")
		delete(w.pending, client)
		return
	}
	rcvNext, ok := w.pending[client]
	if seg.Flags&tcpACK == 0 || !ok {
		return
	}
	delete(w.pending, client)
	log.Println("connection established")
	if err := w.inject(seg, from, rcvNext); err != nil {
		log.Printf("inject into %s: %v", client, err)
		return
	}
	log.Println("boom packet injected")
}

// inject sends the client whose handshake-completing segment is ack a
// segment that acknowledges rcvNext but starts boomSeqBehind before the
// sequence number the client expects.
func (w *boomWatcher) inject(ack tcpSegment, to *net.IPAddr, rcvNext uint32) error {
	boom := tcpSegment{
		SrcPort: w.port,
		DstPort: ack.SrcPort,
		Seq:     ack.Ack - boomSeqBehind,
		Ack:     rcvNext,
		Flags:   tcpPSH | tcpACK,
		Window:  ack.Window,
	}
	b, err := boom.encode(w.local, to.IP, []byte(boomPayload))
	if err != nil {
		return err
	}
	if _, err := w.conn.WriteToIP(b, to); err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	return nil
}

// TCP control bits, as the header's fourteenth byte holds them.
const (
	tcpFIN uint8 = 1 << iota
	tcpSYN
	tcpRST
	tcpPSH
	tcpACK
	tcpURG
	tcpECE
	tcpCWR
)

// tcpHeaderLen is the length of a TCP header without options.
const tcpHeaderLen = 20

// tcpProtocol is TCP's IP protocol number.
const tcpProtocol = 6

// tcpSegment is a TCP header's fields (options aside).
type tcpSegment struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Window           uint16
	Checksum         uint16
	Urgent           uint16
}

// decodeTCP reads the header of the segment b and returns it with the
// segment's data, which starts after the header's options.
func decodeTCP(b []byte) (tcpSegment, []byte, error) {
	if len(b) < tcpHeaderLen {
		return tcpSegment{}, nil, fmt.Errorf("TCP segment of %d bytes: shorter than a header", len(b))
	}
	off := int(b[12]>>4) * 4
	if off < tcpHeaderLen || off > len(b) {
		return tcpSegment{}, nil, fmt.Errorf("TCP data offset %d: outside the %d-byte segment", off, len(b))
	}
	be := binary.BigEndian
	seg := tcpSegment{
		SrcPort:  be.Uint16(b[0:]),
		DstPort:  be.Uint16(b[2:]),
		Seq:      be.Uint32(b[4:]),
		Ack:      be.Uint32(b[8:]),
		Flags:    b[13],
		Window:   be.Uint16(b[14:]),
		Checksum: be.Uint16(b[16:]),
		Urgent:   be.Uint16(b[18:]),
	}
	return seg, b[off:], nil
}

// encode lays out the segment, a header without options and data, sent
// from src to dst, with its checksum (the Checksum field is ignored).
func (s tcpSegment) encode(src, dst net.IP, data []byte) ([]byte, error) {
	b := make([]byte, tcpHeaderLen, tcpHeaderLen+len(data))
	be := binary.BigEndian
	be.PutUint16(b[0:], s.SrcPort)
	be.PutUint16(b[2:], s.DstPort)
	be.PutUint32(b[4:], s.Seq)
	be.PutUint32(b[8:], s.Ack)
	b[12] = (tcpHeaderLen / 4) << 4 // data offset, in 32-bit words
	b[13] = s.Flags
	be.PutUint16(b[14:], s.Window)
	be.PutUint16(b[18:], s.Urgent)
	b = append(b, data...)
	sum, err := tcpChecksum(src, dst, b)
	if err != nil {
		return nil, err
	}
	be.PutUint16(b[16:], sum)
	return b, nil
}

// tcpChecksum is the checksum of the segment b sent from src to dst: over
// the IPv4 or IPv6 pseudo-header and the segment. A segment whose
// checksum field holds its checksum sums to zero.
func tcpChecksum(src, dst net.IP, b []byte) (uint16, error) {
	var pseudo []byte
	be := binary.BigEndian
	switch src4, dst4 := src.To4(), dst.To4(); {
	case src4 != nil && dst4 != nil:
		if len(b) > 0xffff {
			return 0, fmt.Errorf("TCP segment of %d bytes: too long for IPv4", len(b))
		}
		pseudo = append(append(pseudo, src4...), dst4...)
		pseudo = append(pseudo, 0, tcpProtocol)
		pseudo = be.AppendUint16(pseudo, uint16(len(b)))
	case src4 == nil && dst4 == nil && len(src) == net.IPv6len && len(dst) == net.IPv6len:
		pseudo = append(append(pseudo, src...), dst...)
		pseudo = be.AppendUint32(pseudo, uint32(len(b)))
		pseudo = append(pseudo, 0, 0, 0, tcpProtocol)
	default:
		return 0, fmt.Errorf("TCP checksum from %s to %s: not two addresses of one family", src, dst)
	}
	return internetChecksum(append(pseudo, b...)), nil
}

// internetChecksum is RFC 1071's checksum of b: the complement of the
// one's complement sum of its big-endian 16-bit words, an odd last byte
// padded with zero.
func internetChecksum(b []byte) uint16 {
	var sum uint32
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(b[0])<<8 | uint32(b[1])
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
