package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/proxy"
)

// proxyCommand is `svcnet proxy`: the Service proxy of the nodes.
func proxyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proxy",
		Short: "Look at the nodes' Service proxies",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(proxyListCommand())
	return cmd
}

// proxyListCommand is `svcnet proxy list`: each node's frontend → backend
// map, read back from its data plane through the API server's nodes/proxy.
func proxyListCommand() *cobra.Command {
	var kubeconfig, nodeName, output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List each node's Service frontends and the backends its data plane sends them to (nftables rules, or the userspace proxy's sockets), not what the API says",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfigPath(kubeconfig)}, &clientcmd.ConfigOverrides{}).ClientConfig()
			if err != nil {
				return fmt.Errorf("load kubeconfig: %w", err)
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("API client: %w", err)
			}
			nodes, err := proxy.ReadNodes(cmd.Context(), client, nodeName, "")
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(frontendsOutput{Nodes: nodes})
			} else {
				err = writeFrontends(cmd.OutOrStdout(), nodes)
			}
			if err != nil {
				return err
			}
			failed := 0
			for _, n := range nodes {
				if n.Error != "" {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d nodes did not answer", failed, len(nodes))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, an identity that may get nodes/proxy (default: $KUBECONFIG, else the data dir's admin kubeconfig)")
	f.StringVar(&nodeName, "node", "", "only this node (default: every node)")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// frontendsOutput is `svcnet proxy list -o json`.
type frontendsOutput struct {
	Nodes []proxy.NodeFrontends `json:"nodes"`
}

// writeFrontends prints each node's frontends, one line each:
// `default/web  ClusterIP  10.96.100.10:80/TCP → 10.244.0.5:80/TCP`, the
// Service as upstream's ServicePortName (namespace/name[:port]).
func writeFrontends(w io.Writer, nodes []proxy.NodeFrontends) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, n := range nodes {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "node/%s\n", n.Node)
		switch {
		case n.Error != "":
			fmt.Fprintf(tw, "  error: %s\n", n.Error)
		case len(n.Frontends) == 0:
			fmt.Fprintln(tw, "  no frontends")
		}
		for _, f := range n.Frontends {
			svc, kind := f.Service(), string(f.Kind)
			if svc == "" {
				svc = "-"
			} else if f.PortName != "" {
				svc += ":" + f.PortName
			}
			if kind == "" {
				kind = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", svc, kind, f)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the frontends: %w", err)
	}
	return nil
}
