// Package ingress is the networking.k8s.io/v1 Ingress strategy: upstream's
// validation of rules, paths, backends and TLS (with its ratcheting for
// objects stored before a rule tightened), its DefaultIngressClass
// admission, and the CLASS/HOSTS/ADDRESS/PORTS columns.
package ingress

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/registry"
)

const (
	// classAnnotation is the pre-ingressClassName way to pick a class.
	classAnnotation = "kubernetes.io/ingress.class"
	// listedHosts is how many hosts the HOSTS cell shows.
	listedHosts = 3
)

var (
	pathTypes            = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

// Resource describes ingresses; classes, when set, gives new Ingresses
// without a class the default IngressClass (Admit).
func Resource(classes Classes) *registry.Resource {
	ing := func(o runtime.Object) *networkingv1.Ingress { return o.(*networkingv1.Ingress) }
	return &registry.Resource{
		Kind:       networkingv1.SchemeGroupVersion.WithKind("Ingress"),
		Resource:   "ingresses",
		Singular:   "ingress",
		ShortNames: []string{"ing"},
		Namespaced: true,
		Status:     true,
		Generation: true,
		Strategy:   strategy{classes: classes},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Class", Type: "string",
				Description: "The name of the IngressClass resource that should be used for additional configuration"},
				Cell: func(o runtime.Object) interface{} {
					if c := ing(o).Spec.IngressClassName; c != nil {
						return *c
					}
					return "<none>"
				}},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Hosts", Type: "string",
				Description: "Hosts that incoming requests are matched against before the ingress rule"},
				Cell: func(o runtime.Object) interface{} { return formatHosts(ing(o).Spec.Rules) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Address", Type: "string",
				Description: "Address is a list containing ingress points for the load-balancer"},
				Cell: func(o runtime.Object) interface{} { return formatAddress(ing(o).Status.LoadBalancer) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ports", Type: "string",
				Description: "Ports of TLS configurations that open"},
				Cell: func(o runtime.Object) interface{} {
					if len(ing(o).Spec.TLS) > 0 {
						return "80, 443"
					}
					return "80"
				}},
			registry.AgeColumn(),
		},
	}
}

// formatHosts lists the first three rule hosts. Like upstream, rules
// without a host are skipped but counted in "+ N more...", and "*" stands
// for no host at all.
func formatHosts(rules []networkingv1.IngressRule) string {
	var hosts []string
	more := false
	for _, r := range rules {
		if len(hosts) == listedHosts {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(rules)-listedHosts)
	}
	return strings.Join(hosts, ",")
}

// formatAddress is the sorted, de-duplicated load-balancer IPs, or
// hostnames for entries without an IP.
func formatAddress(lb networkingv1.IngressLoadBalancerStatus) string {
	seen := sets.New[string]()
	for _, in := range lb.Ingress {
		switch {
		case in.IP != "":
			seen.Insert(in.IP)
		case in.Hostname != "":
			seen.Insert(in.Hostname)
		}
	}
	list := seen.UnsortedList()
	sort.Strings(list)
	return strings.Join(list, ",")
}

type strategy struct {
	registry.Base
	classes Classes
}

// options are upstream's IngressValidationOptions: leniency for stored
// objects that predate a tightened rule.
type options struct {
	allowInvalidSecretName       bool
	allowInvalidWildcardHostRule bool
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	in := obj.(*networkingv1.Ingress)
	errs := validateSpec(&in.Spec, field.NewPath("spec"), options{})
	if v, ok := in.Annotations[classAnnotation]; ok && in.Spec.IngressClassName != nil && v != *in.Spec.IngressClassName {
		errs = append(errs, field.Invalid(field.NewPath("annotations").Child(classAnnotation), v,
			"must match `ingressClassName` when both are specified"))
	}
	return errs
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	oldIn := old.(*networkingv1.Ingress)
	opts := options{}
	for _, tls := range oldIn.Spec.TLS {
		if len(secretNameErrors(tls.SecretName)) > 0 {
			opts.allowInvalidSecretName = true
		}
	}
	for _, r := range oldIn.Spec.Rules {
		if strings.Contains(r.Host, "*") && len(validateRuleValue(&r.IngressRuleValue, field.NewPath("spec"))) > 0 {
			opts.allowInvalidWildcardHostRule = true
		}
	}
	return validateSpec(&obj.(*networkingv1.Ingress).Spec, field.NewPath("spec"), opts)
}

// validateSpec follows upstream's ValidateIngressSpec.
func validateSpec(spec *networkingv1.IngressSpec, fldPath *field.Path, opts options) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Rules) == 0 && spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(fldPath, spec.Rules, "either `defaultBackend` or `rules` must be specified"))
	}
	if spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(spec.DefaultBackend, fldPath.Child("defaultBackend"))...)
	}
	for i := range spec.Rules {
		errs = append(errs, validateRule(&spec.Rules[i], fldPath.Child("rules").Index(i), opts)...)
	}
	for i, tls := range spec.TLS {
		tlsPath := fldPath.Child("tls").Index(i)
		for j, host := range tls.Hosts {
			errs = append(errs, hostErrors(host, tlsPath.Child("hosts").Index(j))...)
		}
		if !opts.allowInvalidSecretName {
			for _, msg := range secretNameErrors(tls.SecretName) {
				errs = append(errs, field.Invalid(tlsPath.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	if spec.IngressClassName != nil {
		for _, msg := range validation.NameIsDNSSubdomain(*spec.IngressClassName, false) {
			errs = append(errs, field.Invalid(fldPath.Child("ingressClassName"), *spec.IngressClassName, msg))
		}
	}
	return errs
}

// hostErrors checks a host, which may start with a "*." wildcard.
func hostErrors(host string, fldPath *field.Path) field.ErrorList {
	check := utilvalidation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = utilvalidation.IsWildcardDNS1123Subdomain
	}
	var errs field.ErrorList
	for _, msg := range check(host) {
		errs = append(errs, field.Invalid(fldPath, host, msg))
	}
	return errs
}

func secretNameErrors(name string) []string {
	if name == "" {
		return nil
	}
	return validation.NameIsDNSSubdomain(name, false)
}

func validateRule(r *networkingv1.IngressRule, fldPath *field.Path, opts options) field.ErrorList {
	var errs field.ErrorList
	wildcard := strings.Contains(r.Host, "*")
	if r.Host != "" {
		hostPath := fldPath.Child("host")
		if netutils.ParseIPSloppy(r.Host) != nil {
			errs = append(errs, field.Invalid(hostPath, r.Host, "must be a DNS name, not an IP address"))
		}
		errs = append(errs, hostErrors(r.Host, hostPath)...)
	}
	if !wildcard || !opts.allowInvalidWildcardHostRule {
		errs = append(errs, validateRuleValue(&r.IngressRuleValue, fldPath)...)
	}
	return errs
}

func validateRuleValue(v *networkingv1.IngressRuleValue, fldPath *field.Path) field.ErrorList {
	if v.HTTP == nil {
		return nil
	}
	httpPath := fldPath.Child("http")
	var errs field.ErrorList
	if len(v.HTTP.Paths) == 0 {
		errs = append(errs, field.Required(httpPath.Child("paths"), ""))
	}
	for i := range v.HTTP.Paths {
		errs = append(errs, validatePath(&v.HTTP.Paths[i], httpPath.Child("paths").Index(i))...)
	}
	return errs
}

// validatePath follows upstream's validateHTTPIngressPath.
func validatePath(p *networkingv1.HTTPIngressPath, fldPath *field.Path) field.ErrorList {
	if p.PathType == nil {
		return field.ErrorList{field.Required(fldPath.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	pathPath := fldPath.Child("path")
	switch *p.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
		if p.Path != "" {
			for _, seq := range invalidPathSequences {
				if strings.Contains(p.Path, seq) {
					errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("must not contain '%s'", seq)))
				}
			}
			for _, suffix := range invalidPathSuffixes {
				if strings.HasSuffix(p.Path, suffix) {
					errs = append(errs, field.Invalid(pathPath, p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
				}
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
			errs = append(errs, field.Invalid(pathPath, p.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("pathType"), *p.PathType, pathTypes))
	}
	return append(errs, validateBackend(&p.Backend, fldPath.Child("backend"))...)
}

// validateBackend follows upstream's validateIngressBackend, with service
// names checked as DNS-1123 labels (RelaxedServiceNameValidation).
func validateBackend(b *networkingv1.IngressBackend, fldPath *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(fldPath, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		return ValidateObjectReference(b.Resource.APIGroup, b.Resource.Kind, b.Resource.Name, fldPath.Child("resource"))
	case b.Service == nil:
		return field.ErrorList{field.Invalid(fldPath, "", "resource or service backend is required")}
	}
	var errs field.ErrorList
	svc := b.Service
	namePath := fldPath.Child("service", "name")
	if svc.Name == "" {
		errs = append(errs, field.Required(namePath, ""))
	} else {
		for _, msg := range validation.NameIsDNSLabel(svc.Name, false) {
			errs = append(errs, field.Invalid(namePath, svc.Name, msg))
		}
	}
	hasName, hasNumber := svc.Port.Name != "", svc.Port.Number != 0
	switch {
	case hasName && hasNumber:
		errs = append(errs, field.Invalid(fldPath, "", "cannot set both port name & port number"))
	case hasName:
		for _, msg := range utilvalidation.IsValidPortName(svc.Port.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("service", "port", "name"), svc.Port.Name, msg))
		}
	case hasNumber:
		for _, msg := range utilvalidation.IsValidPortNum(int(svc.Port.Number)) {
			errs = append(errs, field.Invalid(fldPath.Child("service", "port", "number"), svc.Port.Number, msg))
		}
	default:
		errs = append(errs, field.Required(fldPath, "port name or number is required"))
	}
	return errs
}

// ValidateObjectReference checks the apiGroup, kind and name of a reference
// to an arbitrary object, as upstream's
// validateIngressTypedLocalObjectReference does for resource backends and
// IngressClass parameters.
func ValidateObjectReference(apiGroup *string, kind, name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if apiGroup != nil {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(*apiGroup) {
			errs = append(errs, field.Invalid(fldPath.Child("apiGroup"), *apiGroup, msg))
		}
	}
	for _, part := range []struct{ name, value string }{{"kind", kind}, {"name", name}} {
		if part.value == "" {
			errs = append(errs, field.Required(fldPath.Child(part.name), ""))
			continue
		}
		for _, msg := range content.IsPathSegmentName(part.value) {
			errs = append(errs, field.Invalid(fldPath.Child(part.name), part.value, msg))
		}
	}
	return errs
}
