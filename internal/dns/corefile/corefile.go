// Package corefile reads the part of CoreDNS's Corefile that a cluster's
// DNS is configured by, so that the kube-system/coredns ConfigMap of a
// kubeadm cluster configures svcnet's cluster DNS the same way: the server
// block's port, and the errors, health, ready, kubernetes, hosts,
// prometheus, forward, cache, loop, reload and loadbalance plugins.
// Plugins svcnet does not play (log among them), and server blocks after
// the first, are listed in Config.Ignored for the caller to warn about,
// rather than refused, so that an edited Corefile never leaves a cluster
// without DNS.
package corefile

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/svcnet/svcnet/internal/dns/hosts"
)

// Config is what a Corefile asks of the cluster DNS.
type Config struct {
	// Port is the server block's port (default 53).
	Port int
	// Health, Ready and Prometheus are the listen addresses of the
	// plugins' HTTP servers, empty when the plugin is absent.
	Health, Ready, Prometheus string
	// Lameduck is how long health keeps answering after shutdown starts.
	Lameduck time.Duration
	// Zones are the kubernetes plugin's zones, the cluster domain first;
	// TTL is its answers' TTL (default 5).
	Zones []string
	TTL   uint32
	// Kubeconfig (with Context) or Endpoint say how the plugin reaches
	// the API; neither means in-cluster configuration.
	Kubeconfig, Context, Endpoint string
	// Forward are the forward plugin's upstreams, host:port; a resolv.conf
	// named as an upstream is read for its nameservers.
	Forward []string
	// CacheTTL caps how long forwarded answers are kept (0: their TTL).
	CacheTTL time.Duration
	// Reload is set when the reload plugin asks for the Corefile to be
	// read again when it changes.
	Reload bool
	// Hosts is the hosts plugin's table (its file's and inline entries),
	// nil without the plugin.
	Hosts *hosts.Table
	// Ignored names the plugins present that svcnet does not play.
	Ignored []string
}

// Default plugin addresses, as CoreDNS's.
const (
	defaultHealth     = ":8080"
	defaultReady      = ":8181"
	defaultPrometheus = "localhost:9153"
	defaultTTL        = 5
)

// directive is one plugin line with its arguments and its block's lines.
type directive struct {
	name  string
	args  []string
	block [][]string
}

// Parse reads a Corefile; readFile reads a resolv.conf that forward names.
// Only the first server block is served.
func Parse(text string, readFile func(string) ([]byte, error)) (*Config, error) {
	keys, dirs, others, err := firstBlock(text)
	if err != nil {
		return nil, err
	}
	c := &Config{Port: 53}
	for _, o := range others {
		c.Ignored = append(c.Ignored, "server block "+o)
	}
	for _, k := range keys {
		k = strings.TrimPrefix(k, "dns://")
		if i := strings.LastIndexByte(k, ':'); i >= 0 {
			p, err := strconv.Atoi(k[i+1:])
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("server block %q: bad port", k)
			}
			c.Port = p
		}
	}
	for _, d := range dirs {
		if err := c.apply(d, keys, readFile); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", d.name, err)
		}
	}
	return c, nil
}

func (c *Config) apply(d directive, keys []string, readFile func(string) ([]byte, error)) error {
	switch d.name {
	case "errors", "loop", "loadbalance":
		// svcnet's server always logs errors, drops an upstream that is the
		// cluster DNS itself (see Config.Forward) and answers in random
		// order.
	case "health":
		c.Health = addrArg(d.args, defaultHealth)
		for _, l := range d.block {
			if l[0] == "lameduck" && len(l) == 2 {
				dur, err := time.ParseDuration(l[1])
				if err != nil {
					return fmt.Errorf("lameduck %q: %w", l[1], err)
				}
				c.Lameduck = dur
			}
		}
	case "ready":
		c.Ready = addrArg(d.args, defaultReady)
	case "prometheus":
		c.Prometheus = addrArg(d.args, defaultPrometheus)
	case "reload":
		c.Reload = true
	case "kubernetes":
		return c.kubernetes(d)
	case "hosts":
		return c.hosts(d, keys, readFile)
	case "forward":
		return c.forward(d, readFile)
	case "cache":
		if len(d.args) > 0 {
			s, err := strconv.Atoi(d.args[0])
			if err != nil || s < 0 {
				return fmt.Errorf("TTL %q is not a number of seconds", d.args[0])
			}
			c.CacheTTL = time.Duration(s) * time.Second
		}
	default:
		c.Ignored = append(c.Ignored, d.name)
	}
	return nil
}

func (c *Config) kubernetes(d directive) error {
	c.Zones = nil
	for _, z := range d.args {
		c.Zones = append(c.Zones, strings.TrimSuffix(z, "."))
	}
	if len(c.Zones) == 0 {
		return errors.New("no zone")
	}
	c.TTL = defaultTTL
	for _, l := range d.block {
		switch l[0] {
		case "ttl":
			t, err := ttlArg(l)
			if err != nil {
				return err
			}
			if t > 3600 {
				return fmt.Errorf("ttl %q: want 0 to 3600 seconds", l[1])
			}
			c.TTL = uint32(t)
		case "kubeconfig":
			if len(l) < 2 || len(l) > 3 {
				return errors.New("kubeconfig takes a file and an optional context")
			}
			c.Kubeconfig = l[1]
			if len(l) == 3 {
				c.Context = l[2]
			}
		case "endpoint":
			if len(l) != 2 {
				return errors.New("endpoint takes one URL")
			}
			c.Endpoint = l[1]
		}
	}
	return nil
}

// hosts reads `hosts [FILE [ZONES...]] { ENTRIES; ttl; fallthrough;
// no_reverse; reload }`: FILE (/etc/hosts by default; a missing one is
// skipped, as CoreDNS only warns) and the inline entries, answered in
// ZONES (by default the server block's).
func (c *Config) hosts(d directive, keys []string, readFile func(string) ([]byte, error)) error {
	var ttl uint32
	fall := false
	var inline []string
	for _, l := range d.block {
		switch l[0] {
		case "ttl":
			t, err := ttlArg(l)
			if err != nil {
				return err
			}
			ttl = uint32(t)
		case "fallthrough":
			fall = true
		case "no_reverse", "reload":
		default:
			inline = append(inline, strings.Join(l, " "))
		}
	}
	t := hosts.New(ttl)
	file := "/etc/hosts"
	if len(d.args) > 0 {
		file = d.args[0]
	}
	// Its zones: those named after the file, else the server block's.
	zones := keys
	if len(d.args) > 1 {
		zones = d.args[1:]
	}
	for _, z := range zones {
		z = strings.TrimPrefix(z, "dns://")
		if i := strings.LastIndexByte(z, ':'); i >= 0 {
			z = z[:i]
		}
		if z = dns.CanonicalName(z); z != "." {
			t.Zones = append(t.Zones, z)
		}
	}
	if b, err := readFile(file); err == nil {
		t.Parse(string(b))
	}
	t.Parse(strings.Join(inline, "\n"))
	t.Fallthrough = fall
	c.Hosts = t
	return nil
}

func (c *Config) forward(d directive, readFile func(string) ([]byte, error)) error {
	if len(d.args) < 2 {
		return errors.New("want a zone and at least one upstream")
	}
	if d.args[0] != "." {
		c.Ignored = append(c.Ignored, "forward "+d.args[0])
		return nil
	}
	c.Forward = nil
	for _, to := range d.args[1:] {
		if strings.HasPrefix(to, "/") {
			b, err := readFile(to)
			if err != nil {
				return fmt.Errorf("read %s: %w", to, err)
			}
			for _, ns := range Nameservers(b) {
				c.Forward = append(c.Forward, net.JoinHostPort(ns, "53"))
			}
			continue
		}
		to = strings.TrimPrefix(to, "dns://")
		if strings.Contains(to, "://") {
			return fmt.Errorf("upstream %q: only plain DNS upstreams are played", to)
		}
		if _, _, err := net.SplitHostPort(to); err != nil {
			to = net.JoinHostPort(strings.Trim(to, "[]"), "53")
		}
		c.Forward = append(c.Forward, to)
	}
	return nil
}

// ttlArg is the seconds of a plugin's `ttl SECONDS` line.
func ttlArg(l []string) (uint64, error) {
	if len(l) != 2 {
		return 0, errors.New("ttl takes one number of seconds")
	}
	t, err := strconv.ParseUint(l[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("ttl %q: %w", l[1], err)
	}
	return t, nil
}

// addrArg is a plugin's listen address argument, or def.
func addrArg(args []string, def string) string {
	if len(args) > 0 {
		return args[0]
	}
	return def
}

// Nameservers are the nameserver lines of a resolv.conf.
func Nameservers(resolvConf []byte) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(resolvConf)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}

// firstBlock splits the first server block of a Corefile into its keys
// and directives, and names the keys of the blocks after it.
func firstBlock(text string) (keys []string, dirs []directive, others []string, err error) {
	lines := tokenLines(text)
	keys, dirs, rest, err := block(lines)
	for err == nil && len(rest) > 0 {
		var more []string
		more, _, rest, err = block(rest)
		others = append(others, strings.Join(more, " "))
	}
	return keys, dirs, others, err
}

// block reads one server block off lines and returns the lines after it.
func block(lines [][]string) ([]string, []directive, [][]string, error) {
	var keys []string
	i := 0
	for ; i < len(lines); i++ {
		l := lines[i]
		if l[len(l)-1] == "{" {
			keys = append(keys, l[:len(l)-1]...)
			i++
			break
		}
		keys = append(keys, l...)
	}
	if len(keys) == 0 {
		return nil, nil, nil, errors.New("no server block")
	}
	var dirs []directive
	for ; i < len(lines); i++ {
		l := lines[i]
		if l[0] == "}" {
			return keys, dirs, lines[i+1:], nil
		}
		d := directive{name: l[0], args: l[1:]}
		if n := len(d.args); n > 0 && d.args[n-1] == "{" {
			d.args = d.args[:n-1]
			for i++; i < len(lines) && lines[i][0] != "}"; i++ {
				d.block = append(d.block, lines[i])
			}
			if i == len(lines) {
				return nil, nil, nil, fmt.Errorf("plugin %s: block not closed", d.name)
			}
		}
		dirs = append(dirs, d)
	}
	return nil, nil, nil, errors.New("server block not closed")
}

// tokenLines splits text into lines of fields, without comments and empty
// lines. An opening brace ends its line and a closing brace is a line of
// its own, so that `health { lameduck 5s }` reads as three lines.
func tokenLines(text string) [][]string {
	var out [][]string
	for line := range strings.SplitSeq(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		var cur []string
		for _, f := range strings.Fields(strings.NewReplacer("{", " { ", "}", " } ").Replace(line)) {
			switch f {
			case "{":
				out, cur = append(out, append(cur, f)), nil
			case "}":
				if len(cur) > 0 {
					out = append(out, cur)
				}
				out, cur = append(out, []string{f}), nil
			default:
				cur = append(cur, f)
			}
		}
		if len(cur) > 0 {
			out = append(out, cur)
		}
	}
	return out
}
