// Package endpointslice is the discovery.k8s.io/v1 EndpointSlice strategy:
// port defaults (name "", protocol TCP), upstream's validation of address
// types, addresses, ports and hints, the v1 rule that deprecatedTopology is
// dropped on write, and the ADDRESSTYPE/PORTS/ENDPOINTS columns.
package endpointslice

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	discoveryv1beta1 "k8s.io/api/discovery/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Upstream's limits.
const (
	maxEndpoints      = 1000
	maxAddresses      = 100
	maxPorts          = 20000
	maxTopologyLabels = 16
	maxZoneHints      = 8
	maxNodeHints      = 8
	// listed is how many ports or addresses a table cell shows.
	listed = 3
)

var (
	addressTypes = []string{string(discoveryv1.AddressTypeFQDN), string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6)}
	protocols    = []string{string(corev1.ProtocolSCTP), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP)}
)

// Resource describes endpointslices.
func Resource() *registry.Resource {
	slice := func(o runtime.Object) *discoveryv1.EndpointSlice { return o.(*discoveryv1.EndpointSlice) }
	doc := discoveryv1beta1.EndpointSlice{}.SwaggerDoc()
	return &registry.Resource{
		Kind:       discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
		Resource:   "endpointslices",
		Singular:   "endpointslice",
		Namespaced: true,
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "AddressType", Type: "string", Description: doc["addressType"]},
				Cell: func(o runtime.Object) interface{} { return string(slice(o).AddressType) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ports", Type: "string", Description: doc["ports"]},
				Cell: func(o runtime.Object) interface{} { return formatPorts(slice(o).Ports) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Endpoints", Type: "string", Description: doc["endpoints"]},
				Cell: func(o runtime.Object) interface{} { return formatEndpoints(slice(o).Endpoints) }},
			registry.AgeColumn(),
		},
	}
}

// formatPorts lists the port numbers (else names, else "*").
func formatPorts(ports []discoveryv1.EndpointPort) string {
	items := make([]string, 0, len(ports))
	for _, p := range ports {
		switch {
		case p.Port != nil:
			items = append(items, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			items = append(items, *p.Name)
		default:
			items = append(items, "*")
		}
	}
	return firstFew(items)
}

// formatEndpoints lists the addresses of all endpoints.
func formatEndpoints(endpoints []discoveryv1.Endpoint) string {
	var items []string
	for _, e := range endpoints {
		items = append(items, e.Addresses...)
	}
	return firstFew(items)
}

// firstFew joins the first three items and counts the rest, as upstream's
// listWithMoreString does; nothing gives "<unset>".
func firstFew(items []string) string {
	switch {
	case len(items) == 0:
		return "<unset>"
	case len(items) > listed:
		return fmt.Sprintf("%s + %d more...", strings.Join(items[:listed], ","), len(items)-listed)
	}
	return strings.Join(items, ",")
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_EndpointPort. The empty name
// matters: `kubectl describe service` dereferences it.
func (strategy) Default(obj runtime.Object) {
	s := obj.(*discoveryv1.EndpointSlice)
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = new(string)
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

// PrepareForCreate drops deprecatedTopology, which the v1 API does not
// accept writes to.
func (strategy) PrepareForCreate(obj runtime.Object) {
	dropTopology(obj.(*discoveryv1.EndpointSlice), nil)
}

// PrepareForUpdate drops deprecatedTopology when the endpoints change,
// keeping a node name that the stored object already carried there.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	s, oldS := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	if apiequality.Semantic.DeepEqual(s.Endpoints, oldS.Endpoints) {
		return
	}
	dropTopology(s, oldS)
}

// dropTopology follows upstream's dropTopologyOnV1.
func dropTopology(s, old *discoveryv1.EndpointSlice) {
	known := sets.New[string]()
	if old != nil {
		for _, e := range old.Endpoints {
			if name, ok := e.DeprecatedTopology[corev1.LabelHostname]; ok {
				known.Insert(name)
			}
		}
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		name, ok := e.DeprecatedTopology[corev1.LabelHostname]
		if e.NodeName == nil && ok && known.Has(name) && len(validation.NameIsDNSSubdomain(name, false)) == 0 {
			e.NodeName = &name
		}
		e.DeprecatedTopology = nil
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSlice(obj.(*discoveryv1.EndpointSlice))
}

// ValidateUpdate adds that addressType never changes.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	s, oldS := obj.(*discoveryv1.EndpointSlice), old.(*discoveryv1.EndpointSlice)
	return append(validateSlice(s), validation.ValidateImmutableField(s.AddressType, oldS.AddressType, field.NewPath("addressType"))...)
}

// validateSlice follows upstream's ValidateEndpointSlice.
func validateSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	typePath := field.NewPath("addressType")
	switch {
	case s.AddressType == "":
		errs = append(errs, field.Required(typePath, ""))
	case !sets.New(addressTypes...).Has(string(s.AddressType)):
		errs = append(errs, field.NotSupported(typePath, s.AddressType, addressTypes))
	}
	errs = append(errs, validateEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	return append(errs, validatePorts(s.Ports, field.NewPath("ports"))...)
}

func validateEndpoints(endpoints []discoveryv1.Endpoint, addressType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxEndpoints)}
	}
	var errs field.ErrorList
	for i, e := range endpoints {
		idxPath := fldPath.Index(i)
		addrPath := idxPath.Child("addresses")
		switch {
		case len(e.Addresses) == 0:
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		case len(e.Addresses) > maxAddresses:
			errs = append(errs, field.TooMany(addrPath, len(e.Addresses), maxAddresses))
		}
		for j, address := range e.Addresses {
			errs = append(errs, validateAddress(address, addressType, addrPath.Index(j))...)
		}
		if e.NodeName != nil {
			errs = append(errs, validate.Name(validation.NameIsDNSSubdomain, *e.NodeName, idxPath.Child("nodeName"))...)
		}
		topologyPath := idxPath.Child("deprecatedTopology")
		if len(e.DeprecatedTopology) > maxTopologyLabels {
			errs = append(errs, field.TooMany(topologyPath, len(e.DeprecatedTopology), maxTopologyLabels))
		}
		errs = append(errs, metavalidation.ValidateLabels(e.DeprecatedTopology, topologyPath)...)
		if e.Hostname != nil {
			errs = append(errs, validate.DNSLabel(*e.Hostname, idxPath.Child("hostname"))...)
		}
		if e.Hints != nil {
			errs = append(errs, validateHints(e.Hints, idxPath.Child("hints"))...)
		}
	}
	return errs
}

// validateAddress checks an address against the slice's type; addresses of
// unknown types were already reported through addressType.
func validateAddress(address string, addressType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	switch addressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := utilvalidation.IsValidIPForLegacyField(fldPath, address, false, nil); len(errs) > 0 {
			return errs
		}
		if netutils.IsIPv4String(address) != (addressType == discoveryv1.AddressTypeIPv4) {
			return field.ErrorList{field.Invalid(fldPath, address, fmt.Sprintf("must be a valid %s address", addressType))}
		}
		return validate.NonSpecialIP(address, fldPath)
	case discoveryv1.AddressTypeFQDN:
		return utilvalidation.IsFullyQualifiedDomainName(fldPath, address)
	}
	return nil
}

func validateHints(h *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	zonesPath := fldPath.Child("forZones")
	if len(h.ForZones) > maxZoneHints {
		return field.ErrorList{field.TooMany(zonesPath, len(h.ForZones), maxZoneHints)}
	}
	errs := validateHintNames(h.ForZones, func(z discoveryv1.ForZone) string { return z.Name }, zonesPath, content.IsLabelValue)
	nodesPath := fldPath.Child("forNodes")
	if len(h.ForNodes) > maxNodeHints {
		return append(errs, field.TooMany(nodesPath, len(h.ForNodes), maxNodeHints))
	}
	return append(errs, validateHintNames(h.ForNodes, func(n discoveryv1.ForNode) string { return n.Name }, nodesPath,
		func(name string) []string { return validation.NameIsDNSSubdomain(name, false) })...)
}

// validateHintNames checks the names of a list of zone or node hints: each
// one passes check and none comes twice.
func validateHintNames[H any](hints []H, name func(H) string, listPath *field.Path, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, h := range hints {
		n, p := name(h), listPath.Index(i).Child("name")
		if seen.Has(n) {
			errs = append(errs, field.Duplicate(p, n))
		}
		seen.Insert(n)
		errs = append(errs, validate.Invalid(p, n, check(n))...)
	}
	return errs
}

func validatePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxPorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idxPath := fldPath.Index(i)
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != "" {
			errs = append(errs, validate.DNSLabel(name, idxPath.Child("name"))...)
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		}
		names.Insert(name)
		switch {
		case p.Protocol == nil:
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		case !sets.New(protocols...).Has(string(*p.Protocol)):
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *p.Protocol, protocols))
		}
		if p.AppProtocol != nil {
			errs = append(errs, validate.Invalid(idxPath.Child("appProtocol"), *p.AppProtocol, content.IsLabelKey(*p.AppProtocol))...)
		}
	}
	return errs
}
