package builtin

import (
	"context"
	"flag"

	"github.com/svcnet/svcnet/internal/dns"
)

// coredns plays the coredns image with svcnet's cluster DNS: the same
// -conf flag and Corefile (internal/dns/corefile reads it).
func coredns(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coredns", flag.ContinueOnError)
	conf := fs.String("conf", "Corefile", "Corefile to load")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return dns.ServeCorefile(ctx, *conf)
}
