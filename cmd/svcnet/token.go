package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/svcnet/svcnet/internal/auth/bootstraptoken"
	"github.com/svcnet/svcnet/internal/cluster"
)

// tokenCommand is kubeadm token's: bootstrap tokens for joining nodes.
func tokenCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage bootstrap tokens (kubeadm token): create, list, delete, generate",
		Args:  cobra.NoArgs,
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the API server, an identity that may write Secrets in kube-system (default: $KUBECONFIG, else the data dir's admin kubeconfig, as kubeadm token looks for admin.conf)")
	client := func() (kubernetes.Interface, error) {
		kubeconfig = kubeconfigPath(kubeconfig)
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
		}
		return kubernetes.NewForConfig(cfg)
	}

	o := cluster.TokenOptions{}
	var printJoin bool
	create := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token on the server (of the form [a-z0-9]{6}.[a-z0-9]{16}; generated if not given)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				o.Token = args[0]
			}
			c, err := client()
			if err != nil {
				return err
			}
			t, err := cluster.CreateToken(cmd.Context(), c, o)
			if err != nil {
				return err
			}
			if !printJoin {
				fmt.Fprintln(cmd.OutOrStdout(), t)
				return nil
			}
			line, err := cluster.JoinCommand(cmd.Context(), c, t)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	f := create.Flags()
	f.DurationVar(&o.TTL, "ttl", 24*time.Hour, "The duration before the token is automatically deleted (e.g. 1s, 2m, 3h). If set to '0', the token will never expire")
	f.StringVar(&o.Description, "description", "", "A human friendly description of how this token is used.")
	f.StringSliceVar(&o.Usages, "usages", bootstraptoken.DefaultUsages, "Describes the ways in which this token can be used. You can pass --usages multiple times or provide a comma separated list of options. Valid options: ["+strings.Join(bootstrapapi.KnownTokenUsages, ",")+"]")
	f.StringSliceVar(&o.Groups, "groups", bootstraptoken.DefaultGroups, "Extra groups that this token will authenticate as when used for authentication. Must match \""+bootstrapapi.BootstrapGroupPattern+"\"")
	f.BoolVar(&printJoin, "print-join-command", false, "Instead of printing only the token, print the full 'svcnet node' flag needed to join a node using the token.")

	list := &cobra.Command{
		Use:   "list",
		Short: "List bootstrap tokens on the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			return cluster.ListTokens(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	del := &cobra.Command{
		Use:   "delete TOKEN-VALUE ...",
		Short: "Delete bootstrap tokens on the server (by ID or whole token)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("missing argument; 'token delete' is missing token of form %q or %q", bootstrapapi.BootstrapTokenPattern, bootstrapapi.BootstrapTokenIDPattern)
			}
			c, err := client()
			if err != nil {
				return err
			}
			return cluster.DeleteTokens(cmd.Context(), c, cmd.OutOrStdout(), args)
		},
	}
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Generate and print a bootstrap token, but do not create it on the server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := bootstraptoken.Parse("")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t)
			return nil
		},
	}
	cmd.AddCommand(create, list, del, generate)
	return cmd
}
