package builtin

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/ingress"
)

// ingressController plays svcnet's ingress controller image with the
// flags of `svcnet ingress`, reaching the API server with the pod's
// service account.
func ingressController(ctx context.Context, args []string) error {
	var o ingress.Options
	fs := pflag.NewFlagSet(IngressController, pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return ingress.Run(ctx, o)
}
