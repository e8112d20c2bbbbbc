// Package nftrace follows one connection from a pod through its node's
// netfilter, for `svcnet trace`: it resolves a name as the pod would (the
// pod's resolv.conf, asked from the pod's network namespace), opens a real
// connection from the pod's namespace (the probe) and has the kernel trace
// the probe's first packet with `meta nftrace`, then reads the trace back:
// the chains, rules and verdicts the packet passed in order, the DNAT the
// packet met (the endpoint), whether it was masqueraded, the route the
// node takes to the endpoint, and what the endpoint answered.
//
// The trace is enabled by a short-lived table of its own in the node's
// namespace (TraceTable) whose one rule matches exactly the probe's first
// packet (source address and port, destination, protocol) and is removed
// when the trace ends, also on error. The kernel's trace messages
// (NFT_MSG_TRACE on the NFNLGRP_NFTRACE netlink group) are decoded here
// rather than read from `nft monitor trace`: the subscription is in place
// before the probe leaves, and a request echoed on the same socket marks
// the end of the messages, so no message is lost or waited for by the
// clock. The rules' text is nft's own (`nft -a list chain`, run in the
// node's namespace), by the handles the messages carry; without the nft
// binary the steps name the rules by handle.
package nftrace

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Path is where a node's agent serves traces, below the API server's
// nodes/NAME/proxy.
const Path = "proxy/trace"

// DefaultTimeout bounds the probe when a request sets none, MaxTimeout
// when it does (a node runs one trace at a time).
const (
	DefaultTimeout = 5 * time.Second
	MaxTimeout     = time.Minute
)

// Request is what `svcnet trace` asks a node's agent: a connection from
// one of its pods to Host:Port.
type Request struct {
	// Namespace and Pod name the pod the probe starts from.
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Host is an IP address, or a name resolved as the pod resolves it.
	Host string `json:"host"`
	Port int    `json:"port"`
	// Protocol is TCP (the default) or UDP.
	Protocol string `json:"protocol,omitempty"`
	// Timeout bounds the probe (default DefaultTimeout).
	Timeout Duration `json:"timeout,omitzero"`
}

// Duration is a time.Duration written as Go's text ("5s") in JSON.
type Duration time.Duration

// MarshalText writes d as "5s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "5s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("timeout %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// Validate checks r and fills its defaults.
func (r *Request) Validate() error {
	r.Protocol = strings.ToUpper(r.Protocol)
	if r.Protocol == "" {
		r.Protocol = "TCP"
	}
	switch {
	case r.Namespace == "" || r.Pod == "":
		return errors.New("the request names no pod")
	case r.Host == "":
		return errors.New("the request names no destination")
	case r.Port < 1 || r.Port > 65535:
		return fmt.Errorf("port %d is out of range", r.Port)
	case r.Protocol != "TCP" && r.Protocol != "UDP":
		return fmt.Errorf("protocol %q: want TCP or UDP", r.Protocol)
	case r.Timeout < 0 || r.Timeout > Duration(MaxTimeout):
		return fmt.Errorf("timeout %s: want up to %s", time.Duration(r.Timeout), MaxTimeout)
	}
	if r.Timeout == 0 {
		r.Timeout = Duration(DefaultTimeout)
	}
	return nil
}

// Source is the pod the probe leaves from, as its node knows it.
type Source struct {
	// IP is the pod's address.
	IP string
	// NetNS is the path of the pod's network namespace (empty: the
	// process's own, a host-network pod's on a node that runs there).
	NetNS string
	// ResolvConf is the path of the pod's /etc/resolv.conf.
	ResolvConf string
}

// Result is one traced connection.
type Result struct {
	// Node is the node the probe left from, which the agent fills in.
	Node string `json:"node,omitempty"`
	// Source is the pod's address and the probe's port.
	Source   string `json:"source"`
	Protocol string `json:"protocol"`
	// DNS is the name's resolution, when Host was a name.
	DNS *DNSAnswer `json:"dns,omitempty"`
	// Destination is the address the probe connected to.
	Destination string `json:"destination"`
	// Steps are the probe's first packet's passes through the node's
	// chains and rules, in order.
	Steps []Step `json:"steps"`
	// DNAT is the address the packet was sent on to ("" when its
	// destination was not rewritten).
	DNAT string `json:"dnat,omitempty"`
	// Masquerade says whether the packet's source was rewritten
	// (masquerade or snat).
	Masquerade bool `json:"masquerade"`
	// Dropped is the step (1-based) that dropped or rejected the packet,
	// 0 if none did.
	Dropped int `json:"dropped,omitempty"`
	// Route is the node's route to the packet's (rewritten) destination,
	// when the packet was not dropped.
	Route *Route `json:"route,omitempty"`
	// Answer is what came back.
	Answer Answer `json:"answer"`
}

// Step is one trace message: a rule the packet matched (with its verdict),
// the end of a chain it returned from, or a base chain's policy.
type Step struct {
	// Family, Table and Chain place the step: "ip", "svcnet",
	// "nat-prerouting".
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	// Type is rule, return (the end of a chain) or policy (a base
	// chain's).
	Type string `json:"type"`
	// Handle and Rule are the rule's handle and nft's text of it.
	Handle uint64 `json:"handle,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// Verdict is what the step decided: continue, accept, drop, return,
	// jump CHAIN, goto CHAIN.
	Verdict string `json:"verdict"`
	// Packet is the packet as the step saw it, set when it differs from
	// the step before (the first step, and after a rewrite).
	Packet string `json:"packet,omitempty"`
	// In and Out are the interfaces the packet came in and goes out.
	In  string `json:"in,omitempty"`
	Out string `json:"out,omitempty"`
}

// String is the step as one line: "ip svcnet services: ip daddr . meta
// l4proto . th dport vmap @service-ips (goto service-…)".
func (s Step) String() string {
	where := s.Family + " " + s.Table + " " + s.Chain + ": "
	switch s.Type {
	case TypePolicy:
		return where + "policy " + s.Verdict
	case TypeReturn:
		return where + "no more rules, back to the calling chain"
	}
	rule := s.Rule
	if rule == "" {
		rule = fmt.Sprintf("rule handle %d", s.Handle)
	}
	if strings.HasSuffix(rule, s.Verdict) { // "jump services"
		return where + rule
	}
	return where + rule + " (verdict " + s.Verdict + ")"
}

// Route is the node's route to an address.
type Route struct {
	To      string `json:"to"`
	Dev     string `json:"dev,omitempty"`
	Gateway string `json:"gateway,omitempty"`
	Src     string `json:"src,omitempty"`
	// Local says the address is the node's own.
	Local bool `json:"local,omitempty"`
	// Error says why the node has no route.
	Error string `json:"error,omitempty"`
}

// String is the route as `ip route get` prints it.
func (r Route) String() string {
	s := r.To
	if r.Error != "" {
		return s + ": " + r.Error
	}
	if r.Local {
		s = "local " + s
	}
	if r.Gateway != "" {
		s += " via " + r.Gateway
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	if r.Src != "" {
		s += " src " + r.Src
	}
	return s
}

// The outcomes of a probe.
const (
	// Connected: a TCP handshake completed.
	Connected = "connected"
	// Answered: a UDP datagram came back.
	Answered = "answered"
	// Refused: a TCP reset or an ICMP port unreachable came back.
	Refused = "refused"
	// Unreachable: an ICMP host or network unreachable came back.
	Unreachable = "unreachable"
	// Timeout: nothing came back in time.
	Timeout = "timeout"
)

// Answer is what came back to the probe.
type Answer struct {
	// Outcome is one of Connected, Answered, Refused, Unreachable,
	// Timeout, or "error".
	Outcome string `json:"outcome"`
	// Detail says more: the error, or what the endpoint sent.
	Detail string `json:"detail,omitempty"`
}

// Tracer traces connections from the pods of a node; one at a time, as
// they share the trace table.
type Tracer struct {
	nodeNetNS string
	mu        sync.Mutex
}

// New traces in the node's network namespace pinned at nodeNetNS (empty:
// the process's own).
func New(nodeNetNS string) *Tracer { return &Tracer{nodeNetNS: nodeNetNS} }

// Trace probes req (validated) from src and reads back the probe's path.
func (t *Tracer) Trace(ctx context.Context, src Source, req Request) (*Result, error) {
	srcIP, err := netip.ParseAddr(src.IP)
	if err != nil {
		return nil, fmt.Errorf("pod address %q: %w", src.IP, err)
	}
	res := &Result{Protocol: req.Protocol, Steps: []Step{}}
	dst, err := netip.ParseAddr(req.Host)
	if err != nil {
		res.DNS, err = resolve(ctx, src, req.Host, srcIP.Is6())
		if err != nil {
			return nil, err
		}
		if dst, err = netip.ParseAddr(res.DNS.Addresses[0]); err != nil {
			return nil, fmt.Errorf("DNS answer %q: %w", res.DNS.Addresses[0], err)
		}
	}
	if dst.Is4() != srcIP.Is4() {
		return nil, fmt.Errorf("the pod's address %s and the destination %s are of different IP families", srcIP, dst)
	}
	dstPort := netip.AddrPortFrom(dst, uint16(req.Port))
	res.Destination = dstPort.String()

	t.mu.Lock()
	defer t.mu.Unlock()
	mon, err := openMonitor(t.nodeNetNS)
	if err != nil {
		return nil, err
	}
	defer mon.close()
	table, err := openTraceTable(t.nodeNetNS)
	if err != nil {
		return nil, err
	}
	defer table.close()
	p := probe{netns: src.NetNS, src: srcIP, dst: dstPort, protocol: req.Protocol, timeout: time.Duration(req.Timeout)}
	if req.Protocol == "UDP" && req.Port == 53 {
		p.query = probeQuery(res.DNS, src.ResolvConf)
	}
	var sport uint16
	var installErr error
	p.bound = func(port uint16) error {
		sport = port
		installErr = table.install(srcIP, dstPort, req.Protocol, port)
		return installErr
	}
	res.Answer = p.run(ctx)
	if installErr != nil {
		return nil, installErr
	}
	if sport != 0 {
		res.Source = netip.AddrPortFrom(srcIP, sport).String()
	}
	// The table goes before the messages are read: they are queued.
	if err := table.remove(); err != nil {
		return nil, err
	}
	if sport == 0 { // the probe never got as far as a socket
		return res, nil
	}
	events, err := mon.collect(ctx)
	if err != nil {
		return nil, err
	}
	events = probeEvents(events, tuple{src: netip.AddrPortFrom(srcIP, sport), dst: dstPort, proto: protoNumber(req.Protocol)})
	names := linkNames(t.nodeNetNS)
	res.Steps = steps(events, ruleTexts(ctx, t.nodeNetNS, events), names)
	res.DNAT, res.Masquerade, res.Dropped = analyze(dstPort, events, res.Steps)
	if res.Answer.Outcome == Connected && res.DNAT != "" {
		res.Answer.Detail = fmt.Sprintf("TCP handshake with %s, which the pod sees as %s", res.DNAT, dstPort)
	}
	if res.Dropped == 0 {
		to := dst
		if res.DNAT != "" {
			to = netip.MustParseAddrPort(res.DNAT).Addr()
		}
		res.Route = route(t.nodeNetNS, to)
	}
	return res, nil
}

// errText is err's text without Go's "dial tcp …: connect:" prefixes.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}
