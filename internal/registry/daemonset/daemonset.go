// Package daemonset is the apps/v1 DaemonSet strategy: upstream's defaults
// (a RollingUpdate of one unavailable pod and no surge, ten revisions kept),
// its spec validation, the immutable selector, the template generation that
// apps/v1 keeps in the deprecated.daemonset.template.generation annotation,
// and the DESIRED/CURRENT/READY/UP-TO-DATE/AVAILABLE/NODE SELECTOR columns.
package daemonset

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// TemplateGenerationAnnotation is where apps/v1 keeps the internal
// spec.templateGeneration: 1 on create, one more on every template change.
const TemplateGenerationAnnotation = "deprecated.daemonset.template.generation"

var rules = workload.Rules{SelectorKind: "daemonset", DeadlineKind: "DaemonSet"}

// Resource describes daemonsets.
func Resource() *registry.Resource {
	count := func(name, doc string, f func(*appsv1.DaemonSetStatus) int32) registry.Column {
		return registry.Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: "integer",
			Description: appsv1.DaemonSetStatus{}.SwaggerDoc()[doc]},
			Cell: func(o runtime.Object) interface{} { return int64(f(&o.(*appsv1.DaemonSet).Status)) }}
	}
	columns := workload.Columns([]registry.Column{
		count("Desired", "desiredNumberScheduled", func(s *appsv1.DaemonSetStatus) int32 { return s.DesiredNumberScheduled }),
		count("Current", "currentNumberScheduled", func(s *appsv1.DaemonSetStatus) int32 { return s.CurrentNumberScheduled }),
		count("Ready", "numberReady", func(s *appsv1.DaemonSetStatus) int32 { return s.NumberReady }),
		count("Up-to-date", "updatedNumberScheduled", func(s *appsv1.DaemonSetStatus) int32 { return s.UpdatedNumberScheduled }),
		count("Available", "numberAvailable", func(s *appsv1.DaemonSetStatus) int32 { return s.NumberAvailable }),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Node Selector", Type: "string",
			Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
			Cell: func(o runtime.Object) interface{} {
				return labels.FormatLabels(o.(*appsv1.DaemonSet).Spec.Template.Spec.NodeSelector)
			}},
	}, workload.SelectorColumn(appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"], metav1.FormatLabelSelector))
	return workload.Unscaled(&registry.Resource{
		Kind:       appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
		Resource:   "daemonsets",
		Singular:   "daemonset",
		ShortNames: []string{"ds"},
		Strategy:   strategy{},
		Columns:    columns,
	})
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_DaemonSet.
func (strategy) Default(obj runtime.Object) {
	ds := obj.(*appsv1.DaemonSet)
	s := &ds.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			s.RollingUpdate.MaxUnavailable = &one
		}
		if s.RollingUpdate.MaxSurge == nil {
			zero := intstr.FromInt32(0)
			s.RollingUpdate.MaxSurge = &zero
		}
	}
	workload.DefaultInt32(&ds.Spec.RevisionHistoryLimit, 10)
	workload.DefaultTemplate(&ds.Spec.Template)
}

// TemplateGeneration reads the template generation annotation, 0 when
// missing or unreadable.
func TemplateGeneration(ds *appsv1.DaemonSet) int64 {
	g, err := strconv.ParseInt(ds.Annotations[TemplateGenerationAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

func setTemplateGeneration(ds *appsv1.DaemonSet, g int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[TemplateGenerationAnnotation] = strconv.FormatInt(g, 10)
}

// PrepareForCreate starts the template generation at 1 (or keeps a
// higher one given), as upstream.
func (strategy) PrepareForCreate(obj runtime.Object) {
	ds := obj.(*appsv1.DaemonSet)
	setTemplateGeneration(ds, max(TemplateGeneration(ds), 1))
}

// PrepareForUpdate keeps the stored template generation, one more when the
// template changed: a writer may not set it.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	ds, oldDS := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
	g := TemplateGeneration(oldDS)
	if !apiequality.Semantic.DeepEqual(ds.Spec.Template, oldDS.Spec.Template) {
		g++
	}
	setTemplateGeneration(ds, g)
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*appsv1.DaemonSet).Spec, field.NewPath("spec"))
}

// ValidateUpdate validates the new spec and keeps the selector.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	errs := workload.ValidateSelectorUnchanged(obj, old)
	return append(errs, validateSpec(&obj.(*appsv1.DaemonSet).Spec, field.NewPath("spec"))...)
}

// validateSpec follows upstream's ValidateDaemonSetSpec.
func validateSpec(spec *appsv1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	errs := workload.ValidateSelectorAndTemplate(spec.Selector, &spec.Template, rules, fldPath)
	errs = append(errs, validation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	return errs
}

// validateUpdateStrategy follows upstream's ValidateDaemonSetUpdateStrategy.
func validateUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	}
	return field.ErrorList{field.NotSupported(fldPath, s, []string{
		string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
}

// validateRollingUpdate follows upstream's ValidateRollingUpdateDaemonSet:
// exactly one of maxUnavailable and maxSurge is non-zero.
func validateRollingUpdate(ru *appsv1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	unavailable, surge := intOrZero(ru.MaxUnavailable), intOrZero(ru.MaxSurge)
	unavailablePath, surgePath := fldPath.Child("maxUnavailable"), fldPath.Child("maxSurge")
	errs = append(errs, workload.ValidateIntOrPercent(unavailable, unavailablePath)...)
	errs = append(errs, workload.ValidateIntOrPercent(surge, surgePath)...)
	errs = append(errs, workload.NotMoreThan100Percent(unavailable, unavailablePath)...)
	errs = append(errs, workload.NotMoreThan100Percent(surge, surgePath)...)
	hasUnavailable, hasSurge := workload.IntOrPercentValue(unavailable) != 0, workload.IntOrPercentValue(surge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(surgePath, surge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(unavailablePath, "cannot be 0 when maxSurge is 0"))
	}
	return errs
}

// intOrZero is the value of an optional int-or-percent, 0 when unset (the
// internal type upstream validates has no pointer).
func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}
