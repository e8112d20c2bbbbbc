// Package ipaddress is the networking.k8s.io/v1 IPAddress strategy: the
// name is an IP address in canonical form (generateName is taken as it is,
// as upstream's), spec.parentRef is required and never changes, and the
// PARENTREF column. The Service allocator (internal/allocator) keeps one
// IPAddress per cluster IP, written in the Service's own transaction; users
// may create more, which reserve their addresses.
package ipaddress

import (
	"context"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Resource describes ipaddresses.
func Resource() *registry.Resource {
	age := registry.AgeColumn()
	// Upstream's printer fills an age cell but declares no column for it,
	// so kubectl prints NAME and PARENTREF only.
	age.Undeclared = true
	return &registry.Resource{
		Kind:           networkingv1.SchemeGroupVersion.WithKind("IPAddress"),
		Resource:       "ipaddresses",
		Singular:       "ipaddress",
		ShortNames:     []string{"ip"},
		NameValidation: ValidateName,
		// Upstream's noopNameGenerator: the name is generateName itself.
		GenerateName: func(base string) string { return base },
		Strategy:     strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("ParentRef", networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"],
				func(ip *networkingv1.IPAddress) string { return formatParentRef(ip.Spec.ParentRef) }),
			age,
		},
	}
}

// formatParentRef is upstream's "resource.group/namespace/name" (no
// ".group" for the core group, no "/namespace" for a cluster-scoped
// parent), lower case, or "<none>".
func formatParentRef(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	s := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		s += "/" + ref.Namespace
	}
	return s + "/" + ref.Name
}

// ValidateName is upstream's ValidateIPAddressName: the name is an IP
// address in canonical form. A generateName is checked the same way.
func ValidateName(name string, _ bool) []string {
	var msgs []string
	for _, err := range utilvalidation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, err.Detail)
	}
	return msgs
}

type strategy struct{ registry.Base }

// Upstream validates IPAddresses twice: by hand (ValidateIPAddress and
// ValidateIPAddressUpdate), and declaratively from the +k8s: tags of
// k8s.io/api (required parentRef, resource and name; immutable parentRef),
// which are beta and so enforced (DeclarativeValidationBeta is on by
// default). The hand-written errors those tags cover are dropped in favour
// of the declarative ones, which come last; the immutable one carries no
// value ("Invalid value: null"). Validate and ValidateUpdate build both
// lists and merge them with apimachinery's own filter, so the messages and
// their order are upstream's.

// Validate follows upstream's ValidateIPAddress on create.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	ref := obj.(*networkingv1.IPAddress).Spec.ParentRef
	return merge(validateParentRef(ref, field.NewPath("spec")), declarative(ref, nil, false))
}

// ValidateUpdate follows upstream's ValidateIPAddress and
// ValidateIPAddressUpdate: parentRef never changes.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	ref, oldRef := obj.(*networkingv1.IPAddress).Spec.ParentRef, old.(*networkingv1.IPAddress).Spec.ParentRef
	path := field.NewPath("spec", "parentRef")
	errs := validateParentRef(ref, field.NewPath("spec"))
	changed := !apiequality.Semantic.DeepEqual(ref, oldRef)
	if changed {
		errs = append(errs, field.Invalid(path, ref, "field is immutable").MarkCoveredByDeclarative().WithOrigin("immutable"))
	}
	return merge(errs, declarative(ref, oldRef, true))
}

// validateParentRef is upstream's validateIPAddressParentReference, its
// required checks marked as covered by the declarative ones.
func validateParentRef(ref *networkingv1.ParentReference, fldPath *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(fldPath.Child("parentRef"), "").MarkCoveredByDeclarative()}
	}
	var errs field.ErrorList
	fldPath = fldPath.Child("parentRef")
	// The core group (of Services) is "", so group cannot be required.
	if ref.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(fldPath.Child("group"), ref.Group, msg))
		}
	}
	errs = append(errs, requiredSegment(ref.Resource, fldPath.Child("resource"))...)
	errs = append(errs, requiredSegment(ref.Name, fldPath.Child("name"))...)
	if ref.Namespace != "" {
		for _, msg := range content.IsPathSegmentName(ref.Namespace) {
			errs = append(errs, field.Invalid(fldPath.Child("namespace"), ref.Namespace, msg))
		}
	}
	return errs
}

// requiredSegment checks a required value that is a path segment.
func requiredSegment(value string, path *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "").MarkCoveredByDeclarative()}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// declarative is upstream's generated Validate_IPAddressSpec: on update
// nothing when parentRef is unchanged, else the required parentRef and
// its immutability, stopping there; on create the required parentRef,
// resource and name.
func declarative(ref, oldRef *networkingv1.ParentReference, update bool) field.ErrorList {
	path := field.NewPath("spec", "parentRef")
	if update {
		if apiequality.Semantic.DeepEqual(ref, oldRef) {
			return nil
		}
		var errs field.ErrorList
		if ref == nil {
			errs = append(errs, field.Required(path, "").MarkBeta())
		}
		return append(errs, field.Invalid(path, nil, "field is immutable").WithOrigin("immutable").MarkBeta())
	}
	if ref == nil {
		return field.ErrorList{field.Required(path, "").MarkBeta()}
	}
	var errs field.ErrorList
	if ref.Resource == "" {
		errs = append(errs, field.Required(path.Child("resource"), "").MarkBeta())
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "").MarkBeta())
	}
	return errs
}

// merge is what upstream's ValidateDeclarativelyWithMigrationChecks does
// with the two lists when beta declarative validation is enforced.
func merge(handwritten, declarativeErrs field.ErrorList) field.ErrorList {
	errs := validate.FilterCoveredHandwrittenErrors(context.Background(), handwritten, declarativeErrs, true)
	return append(errs, declarativeErrs...)
}
