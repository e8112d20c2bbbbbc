// Package endpoints is the legacy v1 Endpoints strategy: port protocols
// default to TCP, subsets are validated as upstream, and the ENDPOINTS
// column lists up to three ready address:port pairs.
package endpoints

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// maxShown is how many address:port pairs the ENDPOINTS cell lists.
const maxShown = 3

// Resource describes endpoints.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       corev1.SchemeGroupVersion.WithKind("Endpoints"),
		Resource:   "endpoints",
		Singular:   "endpoints",
		ShortNames: []string{"ep"},
		Namespaced: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Endpoints", Type: "string",
				Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
				Cell: func(o runtime.Object) interface{} { return format(o.(*corev1.Endpoints)) }},
			registry.AgeColumn(),
		},
	}
}

type strategy struct{ registry.Base }

func (strategy) Default(obj runtime.Object) {
	ep := obj.(*corev1.Endpoints)
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSubsets(obj.(*corev1.Endpoints).Subsets, field.NewPath("subsets"))
}

func (s strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	return s.Validate(obj)
}

func validateSubsets(subsets []corev1.EndpointSubset, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ss := range subsets {
		sp := p.Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(sp, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateAddress(&ss.Addresses[j], sp.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateAddress(&ss.NotReadyAddresses[j], sp.Child("notReadyAddresses").Index(j))...)
		}
		for j, port := range ss.Ports {
			pp := sp.Child("ports").Index(j)
			if len(ss.Ports) > 1 && port.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if port.Name != "" {
				errs = append(errs, validate.DNSLabel(port.Name, pp.Child("name"))...)
			}
			errs = append(errs, validate.PortNumber(port.Port, pp.Child("port"))...)
			errs = append(errs, validate.Protocol(port.Protocol, pp.Child("protocol"))...)
			if port.AppProtocol != nil {
				errs = append(errs, validate.QualifiedName(*port.AppProtocol, pp.Child("appProtocol"))...)
			}
		}
	}
	return errs
}

func validateAddress(addr *corev1.EndpointAddress, p *field.Path) field.ErrorList {
	errs := validate.IP(addr.IP, p.Child("ip"))
	if addr.Hostname != "" {
		errs = append(errs, validate.DNSLabel(addr.Hostname, p.Child("hostname"))...)
	}
	if addr.NodeName != nil {
		errs = append(errs, validate.Name(apivalidation.NameIsDNSSubdomain, *addr.NodeName, p.Child("nodeName"))...)
	}
	return append(errs, validate.NonSpecialIP(addr.IP, p.Child("ip"))...)
}

// format is the ENDPOINTS cell: ready addresses with each port (bare
// addresses for a subset without ports), at most three, then "+ N more...".
func format(ep *corev1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) < maxShown {
					list = append(list, a.IP)
				}
			}
			continue
		}
		for _, port := range ss.Ports {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) < maxShown {
					list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
				}
			}
		}
	}
	out := strings.Join(list, ",")
	if count > maxShown {
		return fmt.Sprintf("%s + %d more...", out, count-maxShown)
	}
	return out
}
