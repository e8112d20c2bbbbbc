// Package apiservice is the apiregistration.k8s.io/v1 APIService strategy,
// as kube-aggregator's (pkg/registry/apiservice and
// pkg/apis/apiregistration/validation): the name must be
// "<version>.<group>", the group a DNS subdomain (empty only for the core
// group's v1), the version a DNS-1035 label, the priorities in range, a
// Service reference complete with a valid port (443 by default), and a
// caBundle or insecureSkipTLSVerify only beside a Service, never both. A
// new APIService without a Service (a Local one, served by the API server
// itself) is Available from the start; status writes change only the
// conditions. The columns are kube-aggregator's: SERVICE ("namespace/name"
// or "Local") and AVAILABLE (the Available condition's status, its reason
// in parentheses when it is not True).
//
// Which APIServices exist for the API server's own group versions is the
// autoregistration loop's business (internal/controlplane/autoregister);
// proxying to an APIService's Service and judging its availability is
// internal/aggregator's.
package apiservice

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	v1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorapply "k8s.io/kube-aggregator/pkg/client/applyconfiguration"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes apiservices.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:       apiregistrationv1.SchemeGroupVersion.WithKind("APIService"),
		Resource:   "apiservices",
		Singular:   "apiservice",
		Categories: []string{"api-extensions"},
		// kube-aggregator's name check: a path segment here, and
		// "<version>.<group>" in Validate, which sees the spec.
		NameValidation: func(name string, _ bool) []string { return content.IsPathSegmentName(name) },
		Status:         true,
		// kube-aggregator's etcd options are kube-apiserver's, which
		// prefix the resource with its group.
		StoragePrefix: "/registry/apiregistration.k8s.io/apiservices/",
		Strategy:      strategy{},
		// client-go's converter does not know kube-aggregator's types.
		TypeConverter: aggregatorapply.NewTypeConverter(registry.Scheme),
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Service", Type: "string",
				Description: "The reference to the service that hosts this API endpoint."},
				Cell: func(o runtime.Object) interface{} { return serviceCell(o.(*apiregistrationv1.APIService)) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Available", Type: "string",
				Description: "Whether this service is available."},
				Cell: func(o runtime.Object) interface{} { return availableCell(o.(*apiregistrationv1.APIService)) }},
			registry.AgeColumn(),
		},
	}
}

// serviceCell is "namespace/name", or "Local" without a Service.
func serviceCell(s *apiregistrationv1.APIService) string {
	if s.Spec.Service == nil {
		return "Local"
	}
	return s.Spec.Service.Namespace + "/" + s.Spec.Service.Name
}

// availableCell is the Available condition's status ("Unknown" without
// one), followed by its reason in parentheses unless it is True.
func availableCell(s *apiregistrationv1.APIService) string {
	c := v1helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
	switch {
	case c == nil:
		return string(apiregistrationv1.ConditionUnknown)
	case c.Status != apiregistrationv1.ConditionTrue && c.Reason != "":
		return fmt.Sprintf("%s (%s)", c.Status, c.Reason)
	default:
		return string(c.Status)
	}
}

type strategy struct{ registry.Base }

// Default is kube-aggregator's only defaulter: a Service's port is 443.
func (strategy) Default(obj runtime.Object) {
	apiregistrationv1.SetObjectDefaults_APIService(obj.(*apiregistrationv1.APIService))
}

// PrepareForCreate marks a Local APIService Available at once, as
// kube-aggregator does (the API server has already emptied the status).
func (strategy) PrepareForCreate(obj runtime.Object) {
	s := obj.(*apiregistrationv1.APIService)
	if s.Spec.Service == nil {
		v1helper.SetAPIServiceCondition(s, v1helper.NewLocalAvailableAPIServiceCondition())
	}
}

// PrepareForStatusUpdate keeps the stored labels, annotations, finalizers
// and owner references, as kube-aggregator's status strategy.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	m, prev := &obj.(*apiregistrationv1.APIService).ObjectMeta, &old.(*apiregistrationv1.APIService).ObjectMeta
	m.Labels, m.Annotations, m.Finalizers, m.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

// Validate is kube-aggregator's ValidateAPIService.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return Validate(obj.(*apiregistrationv1.APIService))
}

// ValidateUpdate is ValidateAPIService of the new object (its name is
// checked again against the spec) and, for writes of the status, the
// conditions' statuses; a write of the main resource keeps the stored
// status, so the latter finds nothing new there.
func (strategy) ValidateUpdate(obj, _ runtime.Object) field.ErrorList {
	s := obj.(*apiregistrationv1.APIService)
	return append(Validate(s), ValidateStatus(&s.Status, field.NewPath("status"))...)
}

// Name is the name an APIService for gv must have: "<version>.<group>",
// "v1." for the core group.
func Name(version, group string) string {
	return version + "." + group
}

// Validate is kube-aggregator's ValidateAPIService without the object
// metadata the API server checks for every kind: the name, and a
// generateName, must be "<version>.<group>" (once they are valid path
// segments, which the resource's NameValidation checks), then the spec.
func Validate(s *apiregistrationv1.APIService) field.ErrorList {
	var errs field.ErrorList
	required := Name(s.Spec.Version, s.Spec.Group)
	meta := field.NewPath("metadata")
	// kube-aggregator's name function also judges generateName, with the
	// same rule.
	if g := s.GenerateName; g != "" && len(content.IsPathSegmentName(g)) == 0 && g != required {
		errs = append(errs, field.Invalid(meta.Child("generateName"), g, mustBe(required)))
	}
	if n := s.Name; n != "" && len(content.IsPathSegmentName(n)) == 0 && n != required {
		errs = append(errs, field.Invalid(meta.Child("name"), n, mustBe(required)))
	}

	spec := field.NewPath("spec")
	// Only the core group, at v1, has an empty group.
	if s.Spec.Group == "" && s.Spec.Version != "v1" {
		errs = append(errs, field.Required(spec.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if s.Spec.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(s.Spec.Group) {
			errs = append(errs, field.Invalid(spec.Child("group"), s.Spec.Group, msg))
		}
	}
	for _, msg := range utilvalidation.IsDNS1035Label(s.Spec.Version) {
		errs = append(errs, field.Invalid(spec.Child("version"), s.Spec.Version, msg))
	}
	if p := s.Spec.GroupPriorityMinimum; p <= 0 || p > 20000 {
		errs = append(errs, field.Invalid(spec.Child("groupPriorityMinimum"), p, "must be positive and less than 20000"))
	}
	if p := s.Spec.VersionPriority; p <= 0 || p > 1000 {
		errs = append(errs, field.Invalid(spec.Child("versionPriority"), p, "must be positive and less than 1000"))
	}

	svc := s.Spec.Service
	if svc == nil {
		if n := len(s.Spec.CABundle); n != 0 {
			errs = append(errs, field.Invalid(spec.Child("caBundle"), fmt.Sprintf("%d bytes", n), "local APIServices may not have a caBundle"))
		}
		if s.Spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), true, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	if svc.Namespace == "" {
		errs = append(errs, field.Required(spec.Child("service", "namespace"), ""))
	}
	if svc.Name == "" {
		errs = append(errs, field.Required(spec.Child("service", "name"), ""))
	}
	// Upstream checks its internal type, where a missing port is 0.
	port := ptr.Deref(svc.Port, 0)
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(spec.Child("service", "port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Spec.InsecureSkipTLSVerify && len(s.Spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(spec.Child("insecureSkipTLSVerify"), true, "may not be true if caBundle is present"))
	}
	return errs
}

func mustBe(required string) string {
	return fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)
}

// ValidateStatus is kube-aggregator's ValidateAPIServiceStatus: every
// condition's status is True, False or Unknown.
func ValidateStatus(status *apiregistrationv1.APIServiceStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range status.Conditions {
		switch c.Status {
		case apiregistrationv1.ConditionTrue, apiregistrationv1.ConditionFalse, apiregistrationv1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(path.Child("conditions").Index(i).Child("status"), c.Status, []string{
				string(apiregistrationv1.ConditionTrue), string(apiregistrationv1.ConditionFalse), string(apiregistrationv1.ConditionUnknown)}))
		}
	}
	return errs
}
