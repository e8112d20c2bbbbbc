// Package lookup asks a DNS server one question and writes its answer as
// text: the node agent's /dns/resolve uses it to ask the cluster DNS from
// the node's network, where cluster IPs are reachable, and the doctor
// reads what the agent answered (Answer) to compare it with the records a
// Service should have.
package lookup

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Path is where a node's agent answers, below the API server's
// nodes/NAME/proxy, with the query's name and type.
const Path = "dns/resolve"

// Answer is what a DNS server answered one question.
type Answer struct {
	// Server is the address asked, Rcode its response code (NOERROR,
	// NXDOMAIN, SERVFAIL...).
	Server string `json:"server"`
	Rcode  string `json:"rcode"`
	// Records are the answer section's records of the type asked, as
	// text: an address for A and AAAA, "PORT TARGET" for SRV, the target
	// for CNAME (names without their final dot), sorted.
	Records []string `json:"records"`
}

// Types are the record types Ask asks for.
var Types = map[string]uint16{"A": dns.TypeA, "AAAA": dns.TypeAAAA, "SRV": dns.TypeSRV, "CNAME": dns.TypeCNAME}

// Ask sends the question name, typ over UDP (over TCP when the answer was
// truncated) through dial to server (host:port) and reads the answer.
func Ask(ctx context.Context, dial func(ctx context.Context, network, address string) (net.Conn, error), server, name, typ string) (Answer, error) {
	qtype, ok := Types[strings.ToUpper(typ)]
	if !ok {
		return Answer{}, fmt.Errorf("record type %q: want A, AAAA, SRV or CNAME", typ)
	}
	if _, ok := dns.IsDomainName(name); !ok || name == "" {
		return Answer{}, fmt.Errorf("%q is not a domain name", name)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.RecursionDesired = true
	r, err := exchange(ctx, dial, "udp", server, q)
	if err == nil && r.Truncated {
		r, err = exchange(ctx, dial, "tcp", server, q)
	}
	if err != nil {
		return Answer{}, fmt.Errorf("ask %s for %s %s: %w", server, typ, name, err)
	}
	a := Answer{Server: server, Rcode: dns.RcodeToString[r.Rcode], Records: []string{}}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != qtype {
			continue // a CNAME on the way to an address
		}
		switch rr := rr.(type) {
		case *dns.A:
			a.Records = append(a.Records, rr.A.String())
		case *dns.AAAA:
			a.Records = append(a.Records, rr.AAAA.String())
		case *dns.SRV:
			a.Records = append(a.Records, strconv.Itoa(int(rr.Port))+" "+strings.TrimSuffix(rr.Target, "."))
		case *dns.CNAME:
			a.Records = append(a.Records, strings.TrimSuffix(rr.Target, "."))
		}
	}
	slices.Sort(a.Records)
	return a, nil
}

// exchange sends q and reads its reply on one connection.
func exchange(ctx context.Context, dial func(ctx context.Context, network, address string) (net.Conn, error), network, server string, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, network, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	c := &dns.Conn{Conn: conn}
	if err := c.WriteMsg(q); err != nil {
		return nil, err
	}
	r, err := c.ReadMsg()
	if err != nil {
		return nil, err
	}
	if r.Id != q.Id {
		return nil, fmt.Errorf("answer to another question (id %d, want %d)", r.Id, q.Id)
	}
	return r, nil
}
