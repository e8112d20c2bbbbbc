// Package validate holds the rules that several kinds share: names, ports,
// IP addresses, environment variables, resource quantities, containers,
// volumes and whole pod specs, plus the defaults of those shared types. It
// follows upstream's pkg/apis/core/validation and pkg/apis/core/v1/defaults.go
// so that messages, field paths and defaulted values are the ones a real API
// server gives. Pods use it directly; workloads with a pod template use
// PodTemplateSpec and DefaultPodSpec.
package validate

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Invalid turns the messages of one of apimachinery's checks into one
// Invalid error each, as upstream does everywhere.
func Invalid(path *field.Path, value string, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// oneOf checks a required value against the values upstream supports,
// listed in the order its "supported values" message prints them.
func oneOf[T ~string](value T, supported []T, path *field.Path) field.ErrorList {
	switch {
	case value == "":
		return field.ErrorList{field.Required(path, "")}
	case !slices.Contains(supported, value):
		return field.ErrorList{field.NotSupported(path, value, supported)}
	}
	return nil
}

// DNSLabel checks an RFC 1123 label (container, port and volume names).
func DNSLabel(value string, path *field.Path) field.ErrorList {
	return Invalid(path, value, validation.IsDNS1123Label(value))
}

// DNSSubdomain checks an RFC 1123 subdomain.
func DNSSubdomain(value string, path *field.Path) field.ErrorList {
	return Invalid(path, value, validation.IsDNS1123Subdomain(value))
}

// QualifiedName checks a Kubernetes qualified name ("prefix/name").
func QualifiedName(value string, path *field.Path) field.ErrorList {
	return Invalid(path, value, validation.IsQualifiedName(value))
}

// Name checks a reference to another object with that kind's name rule.
func Name(fn apivalidation.ValidateNameFunc, value string, path *field.Path) field.ErrorList {
	return Invalid(path, value, fn(value, false))
}

// standardFinalizers are the finalizer names core kinds accept unqualified.
var standardFinalizers = map[string]bool{
	string(corev1.FinalizerKubernetes): true,
	metav1.FinalizerOrphanDependents:   true,
	metav1.FinalizerDeleteDependents:   true,
}

// KubeFinalizerName is the check upstream's core kinds add to every
// finalizer name (metadata.finalizers and a namespace's spec.finalizers):
// an unqualified name must be a standard one.
func KubeFinalizerName(name string, path *field.Path) field.ErrorList {
	if !strings.Contains(name, "/") && !standardFinalizers[name] {
		return field.ErrorList{field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")}
	}
	return nil
}
