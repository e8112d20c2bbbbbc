package nftrace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/lookup"
	"github.com/svcnet/svcnet/internal/netns"
)

// DNSAnswer is how the pod's resolver configuration resolved a name.
type DNSAnswer struct {
	// Name is the name as given.
	Name string `json:"name"`
	// Query is the name that had addresses (the name completed by a
	// search domain, or as given).
	Query string `json:"query"`
	// Server is the nameserver that answered.
	Server string `json:"server"`
	// Addresses are the answer's; the probe goes to the first.
	Addresses []string `json:"addresses"`
	// Tried are the names asked before Query, which had no address.
	Tried []string `json:"tried,omitempty"`
}

// resolvConf is what resolution reads of a resolv.conf.
type resolvConf struct {
	nameservers []string
	search      []string
	ndots       int
}

// parseResolvConf reads nameserver, search (or domain) and options
// ndots, with the resolver's default ndots of 1.
func parseResolvConf(b []byte) resolvConf {
	rc := resolvConf{ndots: 1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			rc.nameservers = append(rc.nameservers, f[1])
		case "search", "domain":
			rc.search = f[1:]
		case "options":
			for _, o := range f[1:] {
				if v, ok := strings.CutPrefix(o, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil && n >= 0 {
						rc.ndots = min(n, 15)
					}
				}
			}
		}
	}
	return rc
}

// candidates are the names a resolver asks for name, in order: the name
// as given first when it has ndots dots or more (or ends with a dot,
// then alone), else after the search domains.
func (rc resolvConf) candidates(name string) []string {
	if strings.HasSuffix(name, ".") {
		return []string{name}
	}
	var searched []string
	for _, s := range rc.search {
		searched = append(searched, dns.Fqdn(name+"."+strings.TrimSuffix(s, ".")))
	}
	if strings.Count(name, ".") >= rc.ndots {
		return append([]string{dns.Fqdn(name)}, searched...)
	}
	return append(searched, dns.Fqdn(name))
}

// resolve resolves name as the pod would: its resolv.conf's search list
// and nameservers, asked from its network namespace; an AAAA question
// for a pod with an IPv6 address, else A.
func resolve(ctx context.Context, src Source, name string, v6 bool) (*DNSAnswer, error) {
	b, err := os.ReadFile(src.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("read the pod's resolv.conf: %w", err)
	}
	rc := parseResolvConf(b)
	if len(rc.nameservers) == 0 {
		return nil, fmt.Errorf("the pod's resolv.conf names no nameserver, so %s cannot be resolved", name)
	}
	typ := "A"
	if v6 {
		typ = "AAAA"
	}
	ans := &DNSAnswer{Name: name}
	for _, q := range rc.candidates(name) {
		a, err := ask(ctx, src.NetNS, rc.nameservers, q, typ)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", name, err)
		}
		if len(a.Records) > 0 {
			ans.Addresses, ans.Query, ans.Server = a.Records, q, a.Server
			return ans, nil
		}
		ans.Tried = append(ans.Tried, q+" ("+a.Rcode+")")
	}
	return nil, fmt.Errorf("%s has no address: asked %s", name, strings.Join(ans.Tried, ", "))
}

// ask asks the nameservers in turn, from the namespace at nsPath, until
// one answers.
func ask(ctx context.Context, nsPath string, servers []string, name, typ string) (lookup.Answer, error) {
	dial := func(ctx context.Context, network, address string) (conn net.Conn, err error) {
		err = netns.Do(nsPath, func() error {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
			return err
		})
		return conn, err
	}
	var errs []error
	for _, s := range servers {
		a, err := lookup.Ask(ctx, dial, net.JoinHostPort(s, "53"), name, typ)
		if err == nil {
			a.Server = s
			return a, nil
		}
		errs = append(errs, fmt.Errorf("nameserver %s: %w", s, err))
	}
	return lookup.Answer{}, errors.Join(errs...)
}

// probeQuery is the name a UDP probe to port 53 asks for: the name
// traced, else the pod's first search domain, else the root.
func probeQuery(answer *DNSAnswer, resolvConfPath string) string {
	if answer != nil {
		return answer.Query
	}
	if b, err := os.ReadFile(resolvConfPath); err == nil {
		if rc := parseResolvConf(b); len(rc.search) > 0 {
			return dns.Fqdn(rc.search[0])
		}
	}
	return "."
}
