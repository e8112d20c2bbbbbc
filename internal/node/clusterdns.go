package node

import (
	"context"
	"log/slog"
	"net/netip"

	clusterdns "github.com/svcnet/svcnet/internal/dns"
)

// serveDNS runs the node's cluster DNS on the pod bridge's address (the
// first of podCIDR) until ctx ends. DNS is an add-on: a failure is logged
// and the node keeps running its pods.
func (a *Agent) serveDNS(ctx context.Context, podCIDR string) {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		slog.Error("cluster DNS: pod CIDR", "podCIDR", podCIDR, "err", err)
		return
	}
	upstreams := a.cfg.DNSUpstreams
	if len(upstreams) == 0 {
		upstreams = a.resolv.nameservers
	}
	err = clusterdns.Run(ctx, clusterdns.Config{
		Client:       a.client,
		NodeName:     a.cfg.NodeName,
		Zone:         a.cfg.ClusterDomain,
		ServiceIP:    a.cfg.ClusterDNS,
		Address:      prefix.Masked().Addr().Next(),
		Upstreams:    upstreams,
		Listen:       a.net.Listen,
		ListenPacket: a.net.ListenPacket,
		Dial:         a.net.Dialer().DialContext,
		Publish:      true,
	})
	if err != nil && ctx.Err() == nil {
		slog.Error("cluster DNS stopped", "err", err)
	}
}
