package main

import (
	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/dns"
)

// dnsCommand runs cluster DNS alone, as the coredns pods run it.
func dnsCommand() *cobra.Command {
	var conf string
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run cluster DNS (what the coredns pods of kube-system run) from a CoreDNS Corefile",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return dns.ServeCorefile(cmd.Context(), conf)
		},
	}
	cmd.Flags().StringVar(&conf, "conf", "Corefile", "the Corefile; its kubernetes plugin's kubeconfig option says how to reach the API server")
	return cmd
}
