package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/internal/cluster"
)

// speakerCommand runs a node's layer 2 speaker alone, as MetalLB's speaker
// DaemonSet runs one per node (svcnet node runs it inside the agent).
func speakerCommand() *cobra.Command {
	o := &cluster.SpeakerOptions{}
	cmd := &cobra.Command{
		Use:   "speaker",
		Short: "Run a node's layer 2 speaker (MetalLB's): answer ARP and NDP for the LoadBalancer IPs the node announces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.RunSpeaker(cmd.Context(), *o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", filepath.Join(cluster.DefaultDataDir(), "kubeconfig"), "kubeconfig of the API server (up writes the speaker's own, system:metallb-speaker, as <data-dir>/metallb-speaker.conf)")
	f.StringVar(&o.NodeName, "node-name", "", "the Node it announces from (required)")
	f.StringVar(&o.NetNS, "netns", "", "the node's network namespace (/var/run/netns/NAME), where it answers")
	return cmd
}
