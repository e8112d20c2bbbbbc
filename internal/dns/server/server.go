// Package server is the cluster DNS server: it answers names of its
// hosts table, questions in the cluster domain (and PTR questions for
// cluster addresses) from the record index, sends everything else to the
// forwarder, follows an
// ExternalName's CNAME out of the zone, speaks UDP and TCP with EDNS0,
// truncates what does not fit a UDP client (TC), and counts queries,
// answers and latency in CoreDNS's series under the svcnet_ prefix.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcnet/svcnet/internal/dns/hosts"
	"github.com/svcnet/svcnet/internal/dns/records"
)

// Exchanger resolves what the cluster does not hold.
type Exchanger interface {
	Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error)
}

// Server answers DNS queries.
type Server struct {
	// hosts, when set, answers first (CoreDNS's hosts plugin); records,
	// when set, answers the cluster domain (the kubernetes plugin).
	hosts   *hosts.Table
	records *records.Index
	forward Exchanger
	// timeout bounds the handling of one query.
	timeout time.Duration

	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	duration  *prometheus.HistogramVec
}

// forwardZone is the zone label of forwarded queries, as CoreDNS labels
// its root server block.
const forwardZone = "."

// maxUDPSize caps the EDNS0 buffer size the server advertises.
const maxUDPSize = 4096

// New returns a Server answering from the hosts table h and the record
// index ix (either may be nil), and through fwd; reg gets its metrics.
func New(h *hosts.Table, ix *records.Index, fwd Exchanger, reg prometheus.Registerer) (*Server, error) {
	s := &Server{
		hosts:   h,
		records: ix,
		forward: fwd,
		timeout: 5 * time.Second,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_requests_total", Help: "Queries, by zone, transport, address family and type.",
		}, []string{"zone", "proto", "family", "type"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svcnet_dns_responses_total", Help: "Answers, by zone and rcode.",
		}, []string{"zone", "rcode"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svcnet_dns_request_duration_seconds",
			Help:    "Time to answer a query, by zone and type.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"zone", "type"}),
	}
	for _, c := range []prometheus.Collector{s.requests, s.responses, s.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register DNS metrics: %w", err)
		}
	}
	return s, nil
}

// Serve answers queries arriving on pc (UDP) and ln (TCP) until ctx ends.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { s.serve(ctx, w, r) })
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	errc := make(chan error, len(servers))
	started := make([]chan struct{}, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		started[i] = make(chan struct{})
		srv.NotifyStartedFunc = sync.OnceFunc(func() { close(started[i]) })
		wg.Go(func() {
			err := srv.ActivateAndServe()
			// A server that failed to start stops no one from waiting.
			srv.NotifyStartedFunc()
			errc <- err
		})
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("serve DNS: %w", err)
	}
	for i, srv := range servers {
		// A Shutdown before the server started would find nothing to
		// stop and leave it serving for ever: wait for its start first.
		<-started[i]
		if e := srv.Shutdown(); e != nil && !errors.Is(e, net.ErrClosed) {
			slog.Debug("stop DNS server", "err", e)
		}
	}
	wg.Wait()
	return err
}

// serve answers one query.
func (s *Server) serve(ctx context.Context, w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, zone := s.answer(ctx, req)
	proto := "udp"
	size := dns.MinMsgSize
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto, size = "tcp", dns.MaxMsgSize
	}
	resp.Extra = withoutOPT(resp.Extra)
	if opt := req.IsEdns0(); opt != nil {
		bufsize := uint16(min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPSize))
		resp.SetEdns0(bufsize, opt.Do())
		if proto == "udp" {
			size = int(bufsize)
		}
	}
	resp.Compress = true
	resp.Truncate(size)
	qtype := "other"
	if len(req.Question) == 1 {
		qtype = typeLabel(req.Question[0].Qtype)
	}
	// Counted before the answer leaves, so that a client that has its
	// answer sees it counted.
	s.requests.WithLabelValues(zone, proto, family(w.RemoteAddr()), qtype).Inc()
	s.responses.WithLabelValues(zone, dns.RcodeToString[resp.Rcode]).Inc()
	if err := w.WriteMsg(resp); err != nil {
		slog.Debug("write DNS answer", "err", err)
	}
	s.duration.WithLabelValues(zone, qtype).Observe(time.Since(start).Seconds())
}

// answer builds the reply to req and names the zone that answered.
func (s *Server) answer(ctx context.Context, req *dns.Msg) (*dns.Msg, string) {
	resp := new(dns.Msg)
	if req.Opcode != dns.OpcodeQuery {
		return resp.SetRcode(req, dns.RcodeNotImplemented), forwardZone
	}
	if len(req.Question) != 1 {
		return resp.SetRcode(req, dns.RcodeFormatError), forwardZone
	}
	q := req.Question[0]
	if s.hosts != nil {
		if rrs, rcode, next := s.hosts.Serve(q); !next {
			resp.SetRcode(req, rcode)
			resp.Authoritative = rcode == dns.RcodeSuccess
			resp.Answer = rrs
			return resp, forwardZone
		}
	}
	var res records.Result
	ok := false
	if s.records != nil {
		res, ok = s.records.Lookup(q)
	}
	if !ok {
		up, err := s.forward.Exchange(ctx, req)
		if err != nil {
			slog.Debug("forward", "name", q.Name, "err", err)
			return resp.SetRcode(req, dns.RcodeServerFailure), forwardZone
		}
		up.Id = req.Id
		return up, forwardZone
	}
	resp.SetRcode(req, res.Rcode)
	resp.Authoritative = true
	resp.Answer, resp.Ns, resp.Extra = res.Answer, res.Ns, res.Extra
	s.chase(ctx, req, resp)
	return resp, s.records.Zone()
}

// chase resolves the target of an answer that ends in a CNAME out of the
// zone (an ExternalName Service) through the forwarder and appends its
// records, as CoreDNS does.
func (s *Server) chase(ctx context.Context, req, resp *dns.Msg) {
	q := req.Question[0]
	if q.Qtype == dns.TypeCNAME || len(resp.Answer) == 0 {
		return
	}
	cname, ok := resp.Answer[len(resp.Answer)-1].(*dns.CNAME)
	if !ok || dns.IsSubDomain(s.records.Zone(), dns.CanonicalName(cname.Target)) {
		return
	}
	follow := new(dns.Msg).SetQuestion(cname.Target, q.Qtype)
	follow.RecursionDesired = true
	if opt := req.IsEdns0(); opt != nil {
		follow.SetEdns0(opt.UDPSize(), opt.Do())
	}
	up, err := s.forward.Exchange(ctx, follow)
	if err != nil {
		slog.Debug("follow CNAME", "target", cname.Target, "err", err)
		return
	}
	resp.Answer = append(resp.Answer, up.Answer...)
}

// family is CoreDNS's label for the client's address family: 1 for IPv4,
// 2 for IPv6.
func family(a net.Addr) string {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	}
	if ip != nil && ip.To4() == nil {
		return "2"
	}
	return "1"
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// typeLabel bounds the type label to the common types, as CoreDNS does.
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeCNAME, dns.TypeTXT, dns.TypeNS, dns.TypeSOA,
		dns.TypeMX, dns.TypeHTTPS, dns.TypeSVCB, dns.TypeANY:
		return dns.TypeToString[t]
	}
	return "other"
}
