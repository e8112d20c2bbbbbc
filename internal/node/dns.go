package node

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Limits of a resolv.conf, as the kubelet applies them.
const (
	maxNameservers = 3
	maxSearch      = 32
)

// Where the node's resolver configuration is read from: /etc/resolv.conf,
// unless that names only a local stub resolver (systemd-resolved's
// 127.0.0.53), which pods cannot reach from their own network namespaces;
// then the file of the upstream servers systemd-resolved writes, as
// kubeadm points the kubelet's --resolv-conf at it.
const (
	hostResolvConf     = "/etc/resolv.conf"
	resolvedResolvConf = "/run/systemd/resolve/resolv.conf"
)

// readHostResolvConf reads the node's resolver configuration, the one
// dnsPolicy Default pods (the cluster DNS's own) get.
func readHostResolvConf() ([]byte, error) {
	b, err := os.ReadFile(hostResolvConf)
	if err != nil {
		return nil, fmt.Errorf("read the node's resolv.conf: %w", err)
	}
	if onlyLoopback(parseResolvConf(b).nameservers) {
		if r, err := os.ReadFile(resolvedResolvConf); err == nil {
			return r, nil
		}
	}
	return b, nil
}

// onlyLoopback reports whether every nameserver is a loopback address
// (and there is at least one).
func onlyLoopback(servers []string) bool {
	for _, s := range servers {
		if ip := net.ParseIP(s); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return len(servers) > 0
}

// resolvConf is a resolver configuration.
type resolvConf struct {
	nameservers, searches, options []string
}

// parseResolvConf reads the nameserver, search and options lines.
func parseResolvConf(b []byte) resolvConf {
	var rc resolvConf
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				rc.nameservers = append(rc.nameservers, f[1])
			}
		case "search", "domain":
			rc.searches = f[1:]
		case "options":
			rc.options = append(rc.options, f[1:]...)
		}
	}
	return rc
}

// podResolvConf is a pod's /etc/resolv.conf for its dnsPolicy and
// dnsConfig, given the node's own and the cluster DNS settings.
func podResolvConf(pod *corev1.Pod, host resolvConf, clusterDNS, domain string) []byte {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	var rc resolvConf
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		rc.nameservers = []string{clusterDNS}
		rc.searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.searches...)
		rc.options = []string{"ndots:5"}
	case corev1.DNSDefault:
		rc = host
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		rc.nameservers = appendUnique(rc.nameservers, dc.Nameservers...)
		rc.searches = appendUnique(rc.searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			rc.options = mergeOption(rc.options, o.Name, opt)
		}
	}
	if len(rc.nameservers) > maxNameservers {
		rc.nameservers = rc.nameservers[:maxNameservers]
	}
	if len(rc.searches) > maxSearch {
		rc.searches = rc.searches[:maxSearch]
	}
	var b bytes.Buffer
	if len(rc.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(rc.searches, " "))
	}
	for _, ns := range rc.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(rc.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(rc.options, " "))
	}
	return b.Bytes()
}

func appendUnique(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// mergeOption replaces the option called name, or appends it.
func mergeOption(opts []string, name, opt string) []string {
	for i, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}

// podHosts is a pod's /etc/hosts, upstream's Kubernetes-managed file; a
// host-network pod gets the node's file.
func podHosts(pod *corev1.Pod, podIP, domain string) ([]byte, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		host, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return nil, fmt.Errorf("read the node's /etc/hosts: %w", err)
		}
		b.Write(host)
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		name := podHostname(pod)
		if pod.Spec.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", podIP, name, pod.Spec.Subdomain, pod.Namespace, domain, name)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, name)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), nil
}

// podHostname is spec.hostname, else the pod's name, cut to 63 characters
// without a trailing '-' or '.'; a host-network pod's is the node's (its
// name, the Node's Hostname address), spec.hostname ignored, as the host's
// UTS namespace gives it upstream.
func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	switch {
	case pod.Spec.HostNetwork && pod.Spec.NodeName != "":
		h = pod.Spec.NodeName
	case pod.Spec.Hostname != "":
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}
