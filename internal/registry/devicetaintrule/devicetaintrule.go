// Package devicetaintrule is the resource.k8s.io/v1 DeviceTaintRule
// strategy, after upstream's pkg/registry/resource/devicetaintrule. A rule
// taints the devices its selector picks (none when the selector is empty)
// with one taint, whose timeAdded defaults to the time of the write and,
// as upstream's, moves to the time of an update that changes the effect
// without setting timeAdded itself. The rule is cluster-scoped, starts at
// metadata.generation 1 and gains one with every spec change; a create
// starts without status, an update keeps the stored one, and the status
// subresource (whose conditions the device taint eviction controller
// writes) changes neither spec nor metadata. A delete answers with a
// Status, as upstream's resource.k8s.io/v1 storage. `kubectl get
// devicetaintrules` shows NAME, KEY, VALUE, EFFECT, TIMEADDED and AGE.
// The spec is checked by package dra.
package devicetaintrule

import (
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate/dra"
)

// Resource describes devicetaintrules.
func Resource() *registry.Resource {
	type rule = *resourceapi.DeviceTaintRule
	taint := resourceapi.DeviceTaint{}.SwaggerDoc()
	return &registry.Resource{
		Kind:       resourceapi.SchemeGroupVersion.WithKind("DeviceTaintRule"),
		Resource:   "devicetaintrules",
		Singular:   "devicetaintrule",
		Status:     true,
		Generation: true,
		Strategy:   strategy{now: time.Now},
		// Upstream's printer: the selector is left out, the taint shown.
		Columns: []registry.Column{
			registry.NameColumn(),
			registry.TextColumn("Key", taint["key"], func(r rule) string { return r.Spec.Taint.Key }),
			registry.TextColumn("Value", taint["value"], func(r rule) string { return r.Spec.Taint.Value }),
			registry.TextColumn("Effect", taint["effect"], func(r rule) string { return string(r.Spec.Taint.Effect) }),
			registry.TextColumn("TimeAdded", taint["timeAdded"], func(r rule) string {
				if t := r.Spec.Taint.TimeAdded; t != nil {
					return registry.Age(*t)
				}
				return ""
			}),
			registry.AgeColumn(),
		},
	}
}

type strategy struct {
	registry.Base
	// now is the clock of timeAdded.
	now func() time.Time
}

var (
	_ registry.Strategy      = strategy{}
	_ registry.StatusUpdater = strategy{}
)

// DefaultTaint is v1's SetDefaults_DeviceTaint: a taint without timeAdded
// was added now, to the second (what the JSON encoding keeps).
func DefaultTaint(t *resourceapi.DeviceTaint, now time.Time) {
	if t.TimeAdded == nil {
		t.TimeAdded = &metav1.Time{Time: now.Truncate(time.Second)}
	}
}

// Default gives the taint its timeAdded.
func (s strategy) Default(obj runtime.Object) {
	DefaultTaint(&obj.(*resourceapi.DeviceTaintRule).Spec.Taint, s.now())
}

// PrepareForCreate starts the rule without status.
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*resourceapi.DeviceTaintRule).Status = resourceapi.DeviceTaintRuleStatus{}
}

// PrepareForUpdate keeps the stored status and, when the effect changes
// but timeAdded does not, sets timeAdded to now: it tells since when the
// effect applies, from which tolerations count their seconds.
func (s strategy) PrepareForUpdate(obj, old runtime.Object) {
	r, prev := obj.(*resourceapi.DeviceTaintRule), old.(*resourceapi.DeviceTaintRule)
	r.Status = prev.Status
	if r.Spec.Taint.Effect != prev.Spec.Taint.Effect && r.Spec.Taint.TimeAdded.Equal(prev.Spec.Taint.TimeAdded) {
		r.Spec.Taint.TimeAdded = &metav1.Time{Time: s.now().Truncate(time.Second)}
	}
}

// PrepareForStatusUpdate keeps the stored spec, labels, annotations,
// finalizers and owner references (upstream's ResetObjectMetaForStatus).
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	r, prev := obj.(*resourceapi.DeviceTaintRule), old.(*resourceapi.DeviceTaintRule)
	r.Spec = prev.Spec
	r.Labels, r.Annotations, r.Finalizers, r.OwnerReferences = prev.Labels, prev.Annotations, prev.Finalizers, prev.OwnerReferences
}

// Validate checks a new rule.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return dra.DeviceTaintRule(obj.(*resourceapi.DeviceTaintRule))
}

// ValidateUpdate checks the spec of an update and, when the status
// changes (only a status write changes it), the status.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	r, prev := obj.(*resourceapi.DeviceTaintRule), old.(*resourceapi.DeviceTaintRule)
	errs := dra.DeviceTaintRuleUpdate(r, prev)
	if !apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
		errs = append(errs, dra.DeviceTaintRuleStatusUpdate(r, prev)...)
	}
	return errs
}
