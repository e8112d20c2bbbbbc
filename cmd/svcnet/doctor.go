package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/doctor"
)

// doctorCommand is `svcnet doctor svc/NAME`, also `kubectl svcnet doctor`
// when the binary is on PATH as kubectl-svcnet (kubectl's plugin name).
func doctorCommand() *cobra.Command {
	var kubeconfig, namespace, output, domain string
	var dataPlane, askDNS bool
	cmd := &cobra.Command{
		Use:   "doctor svc/NAME",
		Short: "Say why a Service does not answer: its selector, pods, ports, load balancer and DNS names, with the evidence; exit 1 when it is not healthy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := serviceArg(args[0])
			if err != nil {
				return err
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			cfg, namespace, err := loadKubeconfig(kubeconfig, namespace)
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			opts := doctor.Options{ClusterDomain: domain, Core: client.CoreV1().RESTClient()}
			if dataPlane {
				opts.DataPlane = doctor.NodesDataPlane(client)
			}
			if askDNS {
				opts.Resolver = doctor.NodesResolver(client)
			}
			report, err := doctor.Diagnose(cmd.Context(), client, namespace, name, opts)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(report)
			} else {
				err = report.Write(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !report.Healthy {
				return fmt.Errorf("service %s/%s is not healthy", report.Namespace, report.Name)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, else the data dir's admin kubeconfig)")
	f.StringVarP(&namespace, "namespace", "n", "", "the Service's namespace (default: the kubeconfig context's, else default)")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	f.StringVar(&domain, "cluster-domain", "cluster.local", "the cluster DNS zone, for the Service's names")
	f.BoolVar(&dataPlane, "data-plane", true, "compare each node's data plane (as `svcnet proxy list` reads it, through nodes/proxy) with the EndpointSlices")
	f.BoolVar(&askDNS, "dns", true, "ask the cluster DNS the Service's names from a Ready node's network (through nodes/proxy) and compare its answers")
	return cmd
}

// serviceArg is the name of svc/NAME, service/NAME, services/NAME or NAME.
func serviceArg(arg string) (string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		return arg, nil
	}
	switch kind {
	case "svc", "service", "services":
		return name, nil
	}
	return "", fmt.Errorf("%q: the doctor diagnoses Services: give svc/NAME", arg)
}

// loadKubeconfig reads the kubeconfig (as kubeconfigPath finds it), and
// its context's namespace when namespace is empty (default, if it names
// none).
func loadKubeconfig(kubeconfig, namespace string) (*rest.Config, string, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfigPath(kubeconfig)}, &clientcmd.ConfigOverrides{})
	if namespace == "" {
		var err error
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", fmt.Errorf("the kubeconfig's namespace: %w", err)
		}
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, namespace, nil
}

// kubeconfigPath is the flag's kubeconfig, else $KUBECONFIG's first, else
// the data dir's admin kubeconfig.
func kubeconfigPath(flag string) string {
	if flag != "" {
		return flag
	}
	if env := filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar)); len(env) > 0 && env[0] != "" {
		return env[0]
	}
	return filepath.Join(cluster.DefaultDataDir(), "kubeconfig")
}
