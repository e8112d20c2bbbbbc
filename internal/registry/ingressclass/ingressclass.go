// Package ingressclass is the networking.k8s.io/v1 IngressClass strategy:
// the Cluster default for parameters.scope, upstream's validation of the
// controller and parameters, the immutable controller, and the
// CONTROLLER/PARAMETERS columns.
package ingressclass

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/ingress"
)

// maxControllerLen is upstream's limit on spec.controller.
const maxControllerLen = 250

var scopes = []string{networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}

// Resource describes ingressclasses.
func Resource() *registry.Resource {
	class := func(o runtime.Object) *networkingv1.IngressClass { return o.(*networkingv1.IngressClass) }
	return &registry.Resource{
		Kind:       networkingv1.SchemeGroupVersion.WithKind("IngressClass"),
		Resource:   "ingressclasses",
		Singular:   "ingressclass",
		Generation: true,
		Strategy:   strategy{},
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Controller", Type: "string",
				Description: "Controller that is responsible for handling this class"},
				Cell: func(o runtime.Object) interface{} { return class(o).Spec.Controller }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Parameters", Type: "string",
				Description: "A reference to a resource with additional parameters"},
				Cell: func(o runtime.Object) interface{} { return formatParameters(class(o).Spec.Parameters) }},
			registry.AgeColumn(),
		},
	}
}

// formatParameters is "Kind[.apiGroup]/name", or "<none>".
func formatParameters(p *networkingv1.IngressClassParametersReference) string {
	if p == nil {
		return "<none>"
	}
	s := p.Kind
	if p.APIGroup != nil {
		s += "." + *p.APIGroup
	}
	return s + "/" + p.Name
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_IngressClass.
func (strategy) Default(obj runtime.Object) {
	if p := obj.(*networkingv1.IngressClass).Spec.Parameters; p != nil && p.Scope == nil {
		scope := networkingv1.IngressClassParametersReferenceScopeCluster
		p.Scope = &scope
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*networkingv1.IngressClass).Spec, field.NewPath("spec"))
}

// ValidateUpdate adds that the controller never changes.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	spec, oldSpec := &obj.(*networkingv1.IngressClass).Spec, &old.(*networkingv1.IngressClass).Spec
	errs := validation.ValidateImmutableField(spec.Controller, oldSpec.Controller, field.NewPath("spec", "controller"))
	return append(errs, validateSpec(spec, field.NewPath("spec"))...)
}

func validateSpec(spec *networkingv1.IngressClassSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	controllerPath := fldPath.Child("controller")
	if spec.Controller == "" {
		errs = append(errs, field.Required(controllerPath, ""))
	} else {
		if len(spec.Controller) > maxControllerLen {
			errs = append(errs, field.TooLong(controllerPath, "", maxControllerLen))
		}
		errs = append(errs, utilvalidation.IsDomainPrefixedPath(controllerPath, spec.Controller)...)
	}
	return append(errs, validateParameters(spec.Parameters, fldPath.Child("parameters"))...)
}

// validateParameters follows upstream's validateIngressClassParametersReference.
func validateParameters(p *networkingv1.IngressClassParametersReference, fldPath *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := ingress.ValidateObjectReference(p.APIGroup, p.Kind, p.Name, fldPath)
	scopePath := fldPath.Child("scope")
	if p.Scope == nil {
		return append(errs, field.Required(scopePath, ""))
	}
	namespacePath := fldPath.Child("namespace")
	switch *p.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if p.Namespace == nil {
			errs = append(errs, field.Required(namespacePath, "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range validation.ValidateNamespaceName(*p.Namespace, false) {
				errs = append(errs, field.Invalid(namespacePath, *p.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if p.Namespace != nil {
			errs = append(errs, field.Forbidden(namespacePath, "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(scopePath, *p.Scope, scopes))
	}
	return errs
}
