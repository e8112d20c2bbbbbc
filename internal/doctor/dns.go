package doctor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/dns/lookup"
	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// dnsNames lists the records the cluster DNS should answer for the
// Service, as the Kubernetes DNS specification (and CoreDNS) gives them:
// NAME.NS.svc.ZONE with the cluster IPs, or for a headless Service the
// endpoints' addresses and a name per endpoint (its hostname, else its
// address with dashes); an SRV record per named port; a CNAME for
// ExternalName.
func (d *diagnosis) dnsNames() {
	svc := d.svc
	zone := strings.TrimSuffix(cmp.Or(d.opts.ClusterDomain, "cluster.local"), ".")
	base := svc.Name + "." + svc.Namespace + ".svc." + zone
	var records []DNSRecord
	addrRecords := func(name string, addrs []string) {
		var v4, v6 []string
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err == nil && ip.Unmap().Is4() {
				v4 = append(v4, a)
			} else if err == nil {
				v6 = append(v6, a)
			}
		}
		slices.Sort(v4)
		slices.Sort(v6)
		if len(v4) > 0 || len(v6) == 0 {
			records = append(records, DNSRecord{Name: name, Type: "A", Answers: slices.Compact(v4)})
		}
		if len(v6) > 0 {
			records = append(records, DNSRecord{Name: name, Type: "AAAA", Answers: slices.Compact(v6)})
		}
	}
	sentence := fmt.Sprintf("Pods find the Service as %s (%s from its own namespace, %s.%s from others); the cluster DNS should answer the records below.", base, svc.Name, svc.Name, svc.Namespace)
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		records = append(records, DNSRecord{Name: base, Type: "CNAME", Answers: []string{svc.Spec.ExternalName}})
		sentence = fmt.Sprintf("The Service is of type ExternalName: the cluster DNS answers %s with a CNAME to %s; it has no cluster IP and no endpoints, so connections go wherever that name resolves.", base, svc.Spec.ExternalName)
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		var all []string
		type srv struct {
			name   string
			proto  corev1.Protocol
			answer string
		}
		var srvs []srv
		var perEndpoint []DNSRecord
		for _, s := range d.slices {
			for _, e := range s.Endpoints {
				if !endpointReady(e) && !svc.Spec.PublishNotReadyAddresses {
					continue
				}
				for _, a := range e.Addresses {
					all = append(all, a)
					host := endpointHost(deref(e.Hostname), a) + "." + base
					perEndpoint = append(perEndpoint, DNSRecord{Name: host, Type: addrType(a), Answers: []string{a}})
					for _, p := range s.Ports {
						if deref(p.Name) != "" && p.Port != nil {
							proto := corev1.ProtocolTCP
							if p.Protocol != nil {
								proto = *p.Protocol
							}
							srvs = append(srvs, srv{deref(p.Name), proto, fmt.Sprintf("%d %s", *p.Port, host)})
						}
					}
				}
			}
		}
		addrRecords(base, all)
		for _, sp := range svc.Spec.Ports {
			if sp.Name == "" {
				continue
			}
			proto := protocol(sp.Protocol)
			r := DNSRecord{Name: srvName(sp.Name, proto, base), Type: "SRV"}
			for _, s := range srvs {
				if s.name == sp.Name && s.proto == proto {
					r.Answers = append(r.Answers, s.answer)
				}
			}
			slices.Sort(r.Answers)
			records = append(records, r)
		}
		slices.SortFunc(perEndpoint, func(a, b DNSRecord) int { return cmp.Compare(a.Name, b.Name) })
		records = append(records, perEndpoint...)
		if len(all) == 0 {
			sentence += " Being headless without ready endpoints, its name has no address yet."
		} else {
			sentence += " Being headless, its name answers with the endpoints' addresses, and each endpoint has a name of its own."
		}
	default:
		addrRecords(base, d.report.ClusterIPs)
		for _, sp := range svc.Spec.Ports {
			if sp.Name != "" {
				records = append(records, DNSRecord{Name: srvName(sp.Name, protocol(sp.Protocol), base), Type: "SRV", Answers: []string{fmt.Sprintf("%d %s", sp.Port, base)}})
			}
		}
	}
	d.report.DNS = records
	evidence := make([]Evidence, 0, min(len(records), maxEvidence+1))
	for i, r := range records {
		if i == maxEvidence {
			evidence = append(evidence, ev("more records", fmt.Sprint(len(records)-maxEvidence)))
			break
		}
		evidence = append(evidence, ev(r.Type+" "+r.Name, cmp.Or(strings.Join(r.Answers, ", "), "(no answer)")))
	}
	if a, ok := d.askDNS(records); ok {
		evidence = append(evidence, ev("cluster DNS "+a.Server, fmt.Sprintf("answers %s as above", plural(min(len(records), maxEvidence), "record", "records"))))
	}
	d.add(SeverityInfo, DNSNames, sentence, evidence...)
}

// Resolver asks the cluster DNS one question: a name and a record type
// (A, AAAA, SRV or CNAME).
type Resolver func(ctx context.Context, name, typ string) (lookup.Answer, error)

// NodesResolver asks the cluster DNS from the network of a Ready node (the
// first by name), through its agent's /dns/resolve (nodes/proxy), as the
// node's pods would. The node is chosen at the first question; the
// Resolver serves one diagnosis at a time.
func NodesResolver(client kubernetes.Interface) Resolver {
	var node string
	return func(ctx context.Context, name, typ string) (lookup.Answer, error) {
		if node == "" {
			list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return lookup.Answer{}, fmt.Errorf("list nodes: %w", err)
			}
			slices.SortFunc(list.Items, func(a, b corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
			for _, n := range list.Items {
				if nodereg.IsReady(&n) {
					node = n.Name
					break
				}
			}
			if node == "" {
				return lookup.Answer{}, errors.New("no node is Ready")
			}
		}
		res := client.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource("proxy").Suffix(lookup.Path).
			Param("name", name).Param("type", typ).Do(ctx)
		var a lookup.Answer
		err := res.Error()
		if err == nil {
			body, _ := res.Raw()
			err = json.Unmarshal(body, &a)
		}
		if err != nil {
			return lookup.Answer{}, fmt.Errorf("get nodes/%s/proxy/%s: %w", node, lookup.Path, err)
		}
		return a, nil
	}
}

// askDNS asks the cluster DNS each record (the first maxEvidence), and
// reports each answer that differs from the record's; an empty answer
// matches a record without answers whatever its response code. It says
// whether every record was answered as it should be, with the last
// answer.
func (d *diagnosis) askDNS(records []DNSRecord) (lookup.Answer, bool) {
	if d.opts.Resolver == nil || len(records) == 0 {
		return lookup.Answer{}, false
	}
	var last lookup.Answer
	same := true
	for _, r := range records[:min(len(records), maxEvidence)] {
		a, err := d.opts.Resolver(d.ctx, r.Name, r.Type)
		if err != nil {
			d.add(SeverityWarning, DNSUnanswered, fmt.Sprintf("The cluster DNS could not be asked for %s %s, so whether it answers the Service's names as it should is not known: %v.", r.Type, r.Name, err))
			return lookup.Answer{}, false
		}
		last = a
		want := slices.Sorted(slices.Values(r.Answers))
		if slices.Equal(a.Records, want) {
			continue
		}
		same = false
		got := strings.Join(a.Records, ", ")
		if len(a.Records) == 0 {
			got = "no records (" + a.Rcode + ")"
		}
		d.add(SeverityError, DNSMismatch, fmt.Sprintf("The cluster DNS answers %s %s with %s, but the Service and its endpoints say %s, so pods that look the Service up by name connect elsewhere, or nowhere. The cluster DNS has not caught up with the API, or does not watch it: look at the logs of the coredns pods in kube-system.",
			r.Type, r.Name, got, cmp.Or(strings.Join(want, ", "), "none")),
			ev("server", a.Server), ev("answer", got), ev("should be", cmp.Or(strings.Join(want, ", "), "none")))
	}
	return last, same
}

// srvName is _PORT._PROTO.BASE, lower case as DNS names are written.
func srvName(port string, proto corev1.Protocol, base string) string {
	return "_" + strings.ToLower(port) + "._" + strings.ToLower(string(proto)) + "." + base
}

// endpointHost is an endpoint's name under its headless Service: its
// hostname, else its address with dashes for dots or colons.
func endpointHost(hostname, addr string) string {
	if hostname != "" {
		return hostname
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(addr)
}

// addrType is A or AAAA for an address.
func addrType(a string) string {
	if ip, err := netip.ParseAddr(a); err == nil && !ip.Unmap().Is4() {
		return "AAAA"
	}
	return "A"
}
