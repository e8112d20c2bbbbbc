package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/ingress"
)

// ingressCommand runs the Ingress controller alone, as its pods in
// svcnet-ingress run it.
func ingressCommand() *cobra.Command {
	var o ingress.Options
	cmd := &cobra.Command{
		Use:   "ingress",
		Short: "Run the Ingress controller: L7 HTTP(S) routing for the Ingresses of the svcnet IngressClass and the Gateways of svcnet.io/gateway-controller GatewayClasses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ingress.Run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
