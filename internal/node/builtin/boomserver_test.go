package builtin

import (
	"bytes"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The checksum matches known sums: RFC 1071's worked example and the
// usual IPv4 header example (whose checksum field, b861, is zeroed).
func TestInternetChecksum(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want uint16
	}{
		{[]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, ^uint16(0xddf2)},
		{[]byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
			0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}, 0xb861},
		// An odd last byte counts as the high byte of a word.
		{[]byte{0x01}, ^uint16(0x0100)},
		{nil, 0xffff},
	} {
		if got := internetChecksum(tc.b); got != tc.want {
			t.Errorf("checksum of % x = %#04x, want %#04x", tc.b, got, tc.want)
		}
	}
}

// A segment encoded for IPv4 or IPv6 decodes to its fields and data, and
// its checksum is right: the segment with it sums to zero, under the
// addresses it was made for only.
func TestTCPSegmentRoundTrip(t *testing.T) {
	seg := tcpSegment{SrcPort: 9000, DstPort: 41234, Seq: 0xfffe7960, Ack: 0x01020304,
		Flags: tcpPSH | tcpACK, Window: 512, Urgent: 7}
	for _, tc := range []struct{ src, dst, other string }{
		{"10.0.0.5", "10.0.1.7", "10.0.1.8"},
		{"fd00::5", "fd00:1::7", "fd00:1::8"},
	} {
		src, dst := net.ParseIP(tc.src), net.ParseIP(tc.dst)
		for _, data := range []string{boomPayload, "even", ""} {
			b, err := seg.encode(src, dst, []byte(data))
			if err != nil {
				t.Fatalf("encode %s to %s: %v", src, dst, err)
			}
			if len(b) != tcpHeaderLen+len(data) || b[12] != 0x50 {
				t.Fatalf("encoded % x: want a 20-byte header (offset 5) and %q", b, data)
			}
			got, payload, err := decodeTCP(b)
			if err != nil {
				t.Fatal(err)
			}
			want := seg
			want.Checksum = got.Checksum
			if got != want || string(payload) != data {
				t.Errorf("decoded %+v %q, want %+v %q", got, payload, want, data)
			}
			if sum, err := tcpChecksum(src, dst, b); err != nil || sum != 0 {
				t.Errorf("%s to %s, %q: recomputed over the checksum %#04x (%v), want 0", src, dst, data, sum, err)
			}
			if sum, _ := tcpChecksum(src, net.ParseIP(tc.other), b); sum == 0 {
				t.Errorf("%s to %s, %q: checksum also fits %s", src, dst, data, tc.other)
			}
			zeroed := bytes.Clone(b)
			zeroed[16], zeroed[17] = 0, 0
			if sum, _ := tcpChecksum(src, dst, zeroed); sum != got.Checksum {
				t.Errorf("checksum %#04x, recomputed %#04x", got.Checksum, sum)
			}
		}
	}
	if _, err := seg.encode(net.ParseIP("10.0.0.5"), net.ParseIP("fd00::7"), nil); err == nil {
		t.Error("encoded a segment from IPv4 to IPv6")
	}
}

// decodeTCP skips the header's options by its data offset and refuses
// segments too short for their header.
func TestDecodeTCP(t *testing.T) {
	b := make([]byte, 28)
	copy(b, []byte{0x23, 0x28, 0xa1, 0x12, 0, 0, 0, 1, 0, 0, 0, 2, 0x60, 0x12, 0xff, 0xff})
	b[27] = 'x' // 24 bytes of header (one word of options), then data
	seg, data, err := decodeTCP(b)
	if err != nil {
		t.Fatal(err)
	}
	want := tcpSegment{SrcPort: 9000, DstPort: 41234, Seq: 1, Ack: 2, Flags: tcpSYN | tcpACK, Window: 0xffff}
	if seg != want || !bytes.Equal(data, b[24:]) {
		t.Errorf("decoded %+v % x, want %+v % x", seg, data, want, b[24:])
	}
	for _, bad := range [][]byte{
		b[:19],
		append([]byte{}, b[:12]...),
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0}, // offset 4: inside the header
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x60, 0, 0, 0, 0, 0, 0, 0}, // offset 6: past the end
	} {
		if _, _, err := decodeTCP(bad); err == nil {
			t.Errorf("decoded % x", bad)
		}
	}
}

func TestBoomPodIPs(t *testing.T) {
	t.Setenv("POD_IP", "10.0.0.5")
	t.Setenv("POD_IPS", "")
	if ips, err := boomPodIPs(); err != nil || len(ips) != 1 || !ips[0].Equal(net.ParseIP("10.0.0.5")) {
		t.Errorf("POD_IP alone: %v, %v", ips, err)
	}
	t.Setenv("POD_IPS", "10.0.0.6, fd00::6")
	if ips, err := boomPodIPs(); err != nil || len(ips) != 2 || !ips[0].Equal(net.ParseIP("10.0.0.6")) || !ips[1].Equal(net.ParseIP("fd00::6")) {
		t.Errorf("POD_IPS: %v, %v", ips, err)
	}
	t.Setenv("POD_IPS", "10.0.0.6,nope")
	if _, err := boomPodIPs(); err == nil {
		t.Error("took an invalid IP")
	}
	t.Setenv("POD_IPS", "")
	t.Setenv("POD_IP", "")
	if _, err := boomPodIPs(); err == nil {
		t.Error("no IP, no error")
	}
}

// The boom server, on 127.0.0.1, says it started once it listens, sees a
// client's handshake complete and injects its segment into the
// connection. What the client's kernel makes of the segment is not the
// test's concern.
func TestBoomServer(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: the boom server's raw sockets need it")
		}
		t.Skip("the boom server's raw sockets need root (NET_RAW)")
	}
	var logged syncBuffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	port, hold := boomPort, boomHold
	boomPort, boomHold = uint16(freePort(t, "tcp")), time.Minute
	t.Cleanup(func() { boomPort, boomHold = port, hold })
	t.Setenv("POD_IPS", "")
	t.Setenv("POD_IP", "127.0.0.1")

	startProgram(t, "the boom server", boomServer)

	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(boomPort))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged.String(), "boom packet injected") {
		if time.Now().After(deadline) {
			t.Fatalf("no injection logged:\n%s", logged.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := logged.String(); !strings.Contains(got, "connection established\n") {
		t.Errorf("the handshake was not logged:\n%s", got)
	}
}
