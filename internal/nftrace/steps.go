package nftrace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// chainKey names a chain.
type chainKey struct{ family, table, chain string }

// ruleTexts reads nft's text of the rules the events name, by chain and
// handle, with `nft -a list chain` in the node's namespace; nil without
// the nft binary. A chain that cannot be listed (gone since) is left out.
func ruleTexts(ctx context.Context, nodeNetNS string, events []event) map[chainKey]map[uint64]string {
	nft, err := exec.LookPath("nft")
	if err != nil {
		slog.Debug("trace: no nft binary, rules are named by handle", "err", err)
		return nil
	}
	texts := map[chainKey]map[uint64]string{}
	for _, ev := range events {
		k := chainKey{ev.family, ev.table, ev.chain}
		if _, done := texts[k]; done || ev.typ != TypeRule {
			continue
		}
		var out []byte
		err := netns.Do(nodeNetNS, func() error {
			var err error
			out, err = exec.CommandContext(ctx, nft, "-a", "list", "chain", k.family, k.table, k.chain).Output()
			return err
		})
		if err != nil {
			slog.Debug("trace: list chain", "family", k.family, "table", k.table, "chain", k.chain, "err", err)
		}
		texts[k] = parseListing(string(out))
	}
	return texts
}

// parseListing reads the rules of `nft -a list chain` output by handle.
func parseListing(out string) map[uint64]string {
	rules := map[uint64]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		text, handle, ok := strings.Cut(line, " # handle ")
		if !ok || strings.HasSuffix(text, "{") {
			continue // a table's or chain's opening line
		}
		if h, err := strconv.ParseUint(handle, 10, 64); err == nil {
			rules[h] = text
		}
	}
	return rules
}

// steps are the events as the result shows them: with their rules' text
// and, where the packet or its interfaces changed, the packet.
func steps(events []event, texts map[chainKey]map[uint64]string, links map[uint32]string) []Step {
	out := make([]Step, 0, len(events))
	last := ""
	var carried *event
	for i, ev := range events {
		// A base chain's end is its policy: kernels since 6.4 report it
		// as the end of the chain too, which goes; its packet goes on to
		// the policy's step.
		if next := i + 1; ev.typ == TypeReturn && next < len(events) && events[next].typ == TypePolicy &&
			events[next].family == ev.family && events[next].table == ev.table && events[next].chain == ev.chain {
			carried = &events[i]
			continue
		}
		if carried != nil && ev.packet == nil {
			ev.packet, ev.iif, ev.oif = carried.packet, carried.iif, carried.oif
		}
		carried = nil
		s := Step{Family: ev.family, Table: ev.table, Chain: ev.chain, Type: ev.typ, Verdict: ev.verdict}
		if ev.typ == TypeRule {
			s.Handle = ev.handle
			s.Rule = texts[chainKey{ev.family, ev.table, ev.chain}][ev.handle]
		}
		if ev.packet != nil {
			in, outIf := linkName(links, ev.iif), linkName(links, ev.oif)
			if view := ev.packet.String() + " " + in + " " + outIf; view != last {
				last = view
				s.Packet, s.In, s.Out = ev.packet.String(), in, outIf
			}
		}
		out = append(out, s)
	}
	return out
}

func linkName(links map[uint32]string, index uint32) string {
	if index == 0 {
		return ""
	}
	if name, ok := links[index]; ok {
		return name
	}
	return fmt.Sprintf("if%d", index)
}

// analyze reads the events' outcome: the address the packet was sent on
// to when a step rewrote its destination dst (as the headers of later
// steps show it, else as a dnat rule says), whether a masquerade or snat
// rule took it, and the step (1-based) that dropped it.
func analyze(dst netip.AddrPort, events []event, steps []Step) (dnat string, masquerade bool, dropped int) {
	for _, ev := range events {
		if ev.packet != nil && ev.packet.dst != dst {
			dnat = ev.packet.dst.String()
			break
		}
	}
	for i, s := range steps {
		if s.Type == TypeRule && s.Verdict == "accept" {
			if _, to, ok := strings.Cut(s.Rule, "dnat to "); ok && dnat == "" {
				dnat = dnatTarget(strings.Fields(to)[0], dst.Port())
			}
			masquerade = masquerade || strings.Contains(s.Rule, "masquerade") || strings.Contains(s.Rule, "snat ")
		}
		if s.Verdict == "drop" && dropped == 0 {
			dropped = i + 1
		}
	}
	return dnat, masquerade, dropped
}

// dnatTarget is a dnat rule's address (with port, or the packet's),
// "" when it is no address (a map).
func dnatTarget(to string, port uint16) string {
	if ap, err := netip.ParseAddrPort(to); err == nil {
		return ap.String()
	}
	if a, err := netip.ParseAddr(to); err == nil {
		return netip.AddrPortFrom(a, port).String()
	}
	return ""
}

// withHandle runs fn with a netlink handle in the namespace at nsPath.
func withHandle(nsPath string, fn func(h *netlink.Handle) error) error {
	ns := vnetns.None()
	if nsPath != "" {
		var err error
		if ns, err = vnetns.GetFromPath(nsPath); err != nil {
			return fmt.Errorf("open network namespace %s: %w", nsPath, err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in the node's namespace: %w", err)
	}
	defer h.Close()
	return fn(h)
}

// linkNames are the node's interfaces' names by index (none when they
// cannot be listed: the steps then show indexes).
func linkNames(nodeNetNS string) map[uint32]string {
	names := map[uint32]string{}
	err := withHandle(nodeNetNS, func(h *netlink.Handle) error {
		links, err := h.LinkList()
		for _, l := range links {
			names[uint32(l.Attrs().Index)] = l.Attrs().Name
		}
		return err
	})
	if err != nil {
		slog.Debug("trace: list the node's interfaces", "err", err)
	}
	return names
}

// route is the node's route to a; its Error says why there is none.
func route(nodeNetNS string, a netip.Addr) *Route {
	r := &Route{To: a.String()}
	err := withHandle(nodeNetNS, func(h *netlink.Handle) error {
		routes, err := h.RouteGet(net.IP(a.AsSlice()))
		if err != nil {
			return err
		}
		if len(routes) == 0 {
			return errors.New("no route")
		}
		rt := routes[0]
		r.Local = rt.Type == unix.RTN_LOCAL
		if rt.Gw != nil {
			r.Gateway = rt.Gw.String()
		}
		if rt.Src != nil {
			r.Src = rt.Src.String()
		}
		if l, err := h.LinkByIndex(rt.LinkIndex); err == nil {
			r.Dev = l.Attrs().Name
		}
		return nil
	})
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
