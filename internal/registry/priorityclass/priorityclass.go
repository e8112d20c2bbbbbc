// Package priorityclass is the scheduling.k8s.io/v1 PriorityClass strategy:
// upstream's default preemptionPolicy (PreemptLowerPriority), its
// validation (names with the "system-" prefix are reserved for the two
// system classes with their exact values, other classes may not go above
// one billion, value and preemptionPolicy never change), metadata.generation
// 1 from the create on, the refusal to delete a system class, the pc short
// name and the VALUE, GLOBAL-DEFAULT and PREEMPTIONPOLICY columns.
//
// The system classes are written when the API server starts
// (internal/controlplane/schedulingbootstrap); giving a new pod its class's
// priority, and refusing a second global default, is the API server's
// Priority admission plugin (internal/admission/priority).
package priorityclass

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
)

// Upstream's constants (pkg/apis/scheduling).
const (
	// HighestUserDefinablePriority is the highest value of a class that
	// is not a system class; values above it are the system's.
	HighestUserDefinablePriority = int32(1000000000)
	// SystemCriticalPriority is where the system classes' values start.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemPriorityClassPrefix starts the names reserved for the system
	// classes.
	SystemPriorityClassPrefix = "system-"
	// SystemClusterCritical is the class of system pods that must run in
	// the cluster, SystemNodeCritical of those that must not leave their
	// node.
	SystemClusterCritical = SystemPriorityClassPrefix + "cluster-critical"
	SystemNodeCritical    = SystemPriorityClassPrefix + "node-critical"
)

// systemClasses are upstream's system PriorityClasses, in its order.
var systemClasses = []schedulingv1.PriorityClass{
	{
		ObjectMeta:  metav1.ObjectMeta{Name: SystemNodeCritical},
		Value:       SystemCriticalPriority + 1000,
		Description: "Used for system critical pods that must not be moved from their current node.",
	},
	{
		ObjectMeta:  metav1.ObjectMeta{Name: SystemClusterCritical},
		Value:       SystemCriticalPriority,
		Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
	},
}

// SystemClasses returns fresh copies of the system PriorityClasses, which
// the API server creates at start: system-node-critical (2000001000), then
// system-cluster-critical (2000000000), neither a global default.
func SystemClasses() []*schedulingv1.PriorityClass {
	out := make([]*schedulingv1.PriorityClass, len(systemClasses))
	for i := range systemClasses {
		out[i] = systemClasses[i].DeepCopy()
	}
	return out
}

// isSystemClass reports whether name is a system class's.
func isSystemClass(name string) bool {
	for _, c := range systemClasses {
		if c.Name == name {
			return true
		}
	}
	return false
}

// knownSystemClass is upstream's IsKnownSystemPriorityClass: nil when a
// system class has exactly this name, value and globalDefault, else what
// differs.
func knownSystemClass(name string, value int32, globalDefault bool) error {
	for _, c := range systemClasses {
		if c.Name != name {
			continue
		}
		if c.Value != value {
			return fmt.Errorf("value of %v PriorityClass must be %v", c.Name, c.Value)
		}
		if c.GlobalDefault != globalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", c.Name, c.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", name)
}

// Resource describes priorityclasses.
func Resource() *registry.Resource {
	type pc = *schedulingv1.PriorityClass
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return &registry.Resource{
		Kind:       schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"),
		Resource:   "priorityclasses",
		Singular:   "priorityclass",
		ShortNames: []string{"pc"},
		// Upstream's strategy sets metadata.generation to 1 on create
		// and never bumps it.
		Strategy: strategy{},
		// Upstream's printer; the API server prints wide, so the
		// preemption policy is always shown, after the age.
		Columns: []registry.Column{
			registry.NameColumn(),
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Value", Type: "integer", Description: doc["value"]},
				Cell: func(o runtime.Object) interface{} { return int64(o.(pc).Value) }},
			{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
				Cell: func(o runtime.Object) interface{} { return o.(pc).GlobalDefault }},
			registry.AgeColumn(),
			registry.TextColumn("PreemptionPolicy", doc["preemptionPolicy"], func(c pc) string {
				if c.PreemptionPolicy == nil {
					return ""
				}
				return string(*c.PreemptionPolicy)
			}),
		},
	}
}

type strategy struct{ registry.Base }

var (
	_ registry.Strategy      = strategy{}
	_ registry.DeleteRefuser = strategy{}
)

// Default is upstream's SetDefaults_PriorityClass: a class without a
// preemption policy preempts lower priorities.
func (strategy) Default(obj runtime.Object) {
	c := obj.(*schedulingv1.PriorityClass)
	if c.PreemptionPolicy == nil {
		policy := corev1.PreemptLowerPriority
		c.PreemptionPolicy = &policy
	}
}

// PrepareForCreate starts the class at generation 1, as upstream's.
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*schedulingv1.PriorityClass).Generation = 1
}

// Validate is upstream's ValidatePriorityClass without the object
// metadata, which the API server checks for every kind.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	c := obj.(*schedulingv1.PriorityClass)
	var errs field.ErrorList
	if strings.HasPrefix(c.Name, SystemPriorityClassPrefix) {
		if err := knownSystemClass(c.Name, c.Value, c.GlobalDefault); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPriorityClassPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if c.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if p := c.PreemptionPolicy; p != nil {
		path := field.NewPath("preemptionPolicy")
		switch *p {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, p,
				[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	return errs
}

// ValidateUpdate is upstream's ValidatePriorityClassUpdate: value and
// preemptionPolicy never change. As upstream, the rest of the class is
// not checked again (a system class may become the global default).
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	c, oldC := obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
	var errs field.ErrorList
	if c.Value != oldC.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, apivalidation.ValidateImmutableField(c.PreemptionPolicy, oldC.PreemptionPolicy,
		field.NewPath("preemptionPolicy"))...)
}

// RefuseDelete refuses to delete a system class, whatever is stored, as
// upstream's PriorityClass storage does on a DELETE of one class (its
// deletecollection does not ask).
func (strategy) RefuseDelete(name string) error {
	if isSystemClass(name) {
		return apierrors.NewForbidden(schedulingv1.Resource("priorityclasses"), name,
			errors.New("this is a system priority class and cannot be deleted"))
	}
	return nil
}
