package doctor

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	d.add(SeverityInfo, DNSNames, sentence, evidence...)
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
