package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/nftrace"
)

// traceCommand is `svcnet trace --from pod/NAME --to svc/NAME:PORT`: one
// real connection from a pod, followed through its node's nftables by the
// kernel's own trace.
func traceCommand() *cobra.Command {
	var kubeconfig, namespace, from, to, protocol, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "trace --from pod/NAME --to svc/NAME[:PORT] | IP:PORT | DNSNAME:PORT",
		Short: "Follow one connection from a pod: its DNS answer, the nftables rules and verdicts its first packet passes on the pod's node (the kernel's trace), the DNAT, masquerade, route, and the endpoint's answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output %q: want text or json", output)
			}
			if from == "" || to == "" {
				return errors.New("--from and --to are required")
			}
			cfg, namespace, err := loadKubeconfig(kubeconfig, namespace)
			if err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("API client: %w", err)
			}
			out, err := runTrace(cmd.Context(), client, namespace, from, to, strings.ToUpper(protocol), timeout)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			return writeTrace(cmd.OutOrStdout(), out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster, an identity that may get pods, services, nodes and create nodes/proxy (default: $KUBECONFIG, else the data dir's admin kubeconfig)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the pod and the Service (default: the kubeconfig context's, else default)")
	f.StringVar(&from, "from", "", "the pod the connection starts from: pod/NAME")
	f.StringVar(&to, "to", "", "where it goes: svc/NAME[:PORT] (a port's number or name), IP:PORT, or DNSNAME:PORT resolved as the pod resolves it")
	f.StringVar(&protocol, "protocol", "", "TCP or UDP (default: the Service port's, else TCP)")
	f.DurationVar(&timeout, "timeout", nftrace.DefaultTimeout, "how long the probe waits for an answer")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// traceOutput is a trace with what the API says about its addresses, as
// `svcnet trace -o json` prints it.
type traceOutput struct {
	// From is the pod (namespace/name) and To the destination as given.
	From string `json:"from"`
	To   string `json:"to"`
	// Service is the Service port traced (svc/NAME:PORT).
	Service *traceService `json:"service,omitempty"`
	*nftrace.Result
	// Endpoint is the pod (namespace/name) that has the address the
	// packet went to, and EndpointNode its node.
	Endpoint     string `json:"endpoint,omitempty"`
	EndpointNode string `json:"endpointNode,omitempty"`
	// GatewayNode is the node the route's gateway is.
	GatewayNode string `json:"gatewayNode,omitempty"`
}

// traceService is the Service port a trace goes to.
type traceService struct {
	Name      string `json:"name"`
	Port      string `json:"port"`
	ClusterIP string `json:"clusterIP"`
}

// runTrace asks the node of the pod named by from to trace a connection
// to to, and looks up the endpoint and nodes the answer names.
func runTrace(ctx context.Context, client kubernetes.Interface, namespace, from, to, protocol string, timeout time.Duration) (*traceOutput, error) {
	podName := from
	if kind, name, ok := strings.Cut(from, "/"); ok {
		if kind != "pod" && kind != "pods" && kind != "po" {
			return nil, fmt.Errorf("--from %q: want pod/NAME", from)
		}
		podName = name
	}
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", namespace, podName, err)
	}
	if pod.Spec.NodeName == "" || pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s/%s has no node or IP yet", namespace, podName)
	}
	out := &traceOutput{From: namespace + "/" + podName, To: to}
	req := nftrace.Request{Namespace: namespace, Pod: podName, Protocol: protocol, Timeout: nftrace.Duration(timeout)}
	if err := traceTarget(ctx, client, namespace, to, &req, out); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode the trace request: %w", err)
	}
	// Result.Error, unlike DoRaw, reads the agent's Status.
	res := client.CoreV1().RESTClient().Post().Resource("nodes").Name(pod.Spec.NodeName).
		SubResource("proxy").Suffix(nftrace.Path).Body(body).Do(ctx)
	if err := res.Error(); err != nil {
		return nil, fmt.Errorf("post nodes/%s/proxy/%s: %w", pod.Spec.NodeName, nftrace.Path, err)
	}
	raw, _ := res.Raw()
	out.Result = &nftrace.Result{}
	if err := json.Unmarshal(raw, out.Result); err != nil {
		return nil, fmt.Errorf("decode node %s's trace: %w", pod.Spec.NodeName, err)
	}
	return out, lookUpAddresses(ctx, client, out)
}

// traceTarget reads --to into req: a Service port's cluster IP, port and
// protocol, or a host (an IP, or a name the node resolves) and port.
func traceTarget(ctx context.Context, client kubernetes.Interface, namespace, to string, req *nftrace.Request, out *traceOutput) error {
	target, isService := "", false
	for _, p := range []string{"svc/", "service/", "services/"} {
		if rest, ok := strings.CutPrefix(to, p); ok {
			target, isService = rest, true
		}
	}
	if !isService {
		host, port, err := net.SplitHostPort(to)
		if err != nil {
			return fmt.Errorf("--to %q: want svc/NAME[:PORT], IP:PORT or NAME:PORT", to)
		}
		if req.Port, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("--to %q: port %q is not a number", to, port)
		}
		req.Host = host
		return nil
	}
	name, port, _ := strings.Cut(target, ":")
	svc, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get service %s/%s: %w", namespace, name, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return fmt.Errorf("service %s/%s has no cluster IP (headless or ExternalName): trace to its DNS name or a pod's IP", namespace, name)
	}
	var sp *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if port == "" && len(svc.Spec.Ports) == 1 || port == p.Name || port == strconv.Itoa(int(p.Port)) {
			sp = &svc.Spec.Ports[i]
			break
		}
	}
	if sp == nil {
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, strings.TrimPrefix(p.Name+" ", " ")+strconv.Itoa(int(p.Port)))
		}
		return fmt.Errorf("service %s/%s has no port %q (it has: %s)", namespace, name, port, strings.Join(ports, ", "))
	}
	req.Host, req.Port = svc.Spec.ClusterIP, int(sp.Port)
	if req.Protocol == "" {
		req.Protocol = string(sp.Protocol)
	}
	portText := fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
	if sp.Name != "" {
		portText = sp.Name + " " + portText
	}
	out.Service = &traceService{Name: namespace + "/" + name, Port: portText, ClusterIP: svc.Spec.ClusterIP}
	return nil
}

// lookUpAddresses names the pod and node that have the address the
// packet went to, and the node that is the route's gateway.
func lookUpAddresses(ctx context.Context, client kubernetes.Interface, out *traceOutput) error {
	dst := out.DNAT
	if dst == "" {
		dst = out.Destination
	}
	if out.Dropped != 0 {
		return nil
	}
	ap, err := netip.ParseAddrPort(dst)
	if err != nil {
		return fmt.Errorf("the node's trace: address %q: %w", dst, err)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("status.podIP", ap.Addr().String()).String()})
	if err != nil {
		return fmt.Errorf("list the pods of %s: %w", ap.Addr(), err)
	}
	for _, p := range pods.Items {
		if !p.Spec.HostNetwork && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			out.Endpoint, out.EndpointNode = p.Namespace+"/"+p.Name, p.Spec.NodeName
			break
		}
	}
	if out.Route == nil || out.Route.Gateway == "" {
		return nil
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Address == out.Route.Gateway {
				out.GatewayNode = n.Name
			}
		}
	}
	return nil
}

// writeTrace prints the trace as a numbered list.
func writeTrace(w io.Writer, t *traceOutput) error {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	to := t.To
	if t.Service != nil {
		to = fmt.Sprintf("%s (Service %s port %s, cluster IP %s)", t.To, t.Service.Name, t.Service.Port, t.Service.ClusterIP)
	}
	header := fmt.Sprintf("Trace of %s from pod %s on node %s to %s\n", strings.ToLower(t.Protocol), t.From, t.Node, to)
	if d := t.DNS; d != nil {
		add("DNS %s → %s (%s, answered by %s)", d.Name, strings.Join(d.Addresses, ", "), strings.TrimSuffix(d.Query, "."), d.Server)
		for _, tried := range d.Tried {
			lines[len(lines)-1] += "\n      no address for " + tried
		}
	}
	add("probe %s → %s from the pod's network namespace", t.Source, t.Destination)
	if len(t.Steps) == 0 {
		add("no nftables step traced on node %s", t.Node)
	}
	stepLine := make([]int, len(t.Steps))
	for i, s := range t.Steps {
		stepLine[i] = len(lines) + 1
		line := s.String()
		if s.Packet != "" {
			line += "\n      packet " + s.Packet
			if s.In != "" {
				line += " in " + s.In
			}
			if s.Out != "" {
				line += " out " + s.Out
			}
		}
		lines = append(lines, line)
	}
	switch {
	case t.DNAT != "":
		add("DNAT to %s%s", t.DNAT, endpointText(t))
	case t.Dropped == 0:
		add("no DNAT: the destination %s stays%s", t.Destination, endpointText(t))
	}
	if t.Dropped != 0 {
		verb := "dropped"
		if strings.Contains(t.Steps[t.Dropped-1].Rule, "reject") {
			verb = "rejected"
		}
		add("%s at step %d: %s", verb, stepLine[t.Dropped-1], t.Steps[t.Dropped-1])
	} else if t.Masquerade {
		add("masquerade: yes, the source becomes the node's address")
	} else {
		add("masquerade: no, the endpoint sees the pod's address")
	}
	if r := t.Route; r != nil {
		where := "to node " + t.GatewayNode
		switch {
		case r.Error != "":
			where = "no route"
		case r.Local:
			where = "the node's own address"
		case r.Gateway == "":
			where = "local to node " + t.Node
		case t.GatewayNode == "":
			where = "to gateway " + r.Gateway
		}
		add("route: %s (%s)", r, where)
	}
	answer := t.Answer.Outcome
	if t.Answer.Detail != "" {
		answer += " (" + t.Answer.Detail + ")"
	}
	add("answer: %s", answer)
	var b strings.Builder
	b.WriteString(header)
	for i, l := range lines {
		fmt.Fprintf(&b, "%3d. %s\n", i+1, l)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write the trace: %w", err)
	}
	return nil
}

// endpointText names the pod that has the address the packet went to.
func endpointText(t *traceOutput) string {
	if t.Endpoint == "" {
		return ""
	}
	return fmt.Sprintf(" (pod %s on node %s)", t.Endpoint, t.EndpointNode)
}
