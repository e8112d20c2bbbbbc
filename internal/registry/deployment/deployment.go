// Package deployment is the apps/v1 Deployment strategy: upstream's
// defaults (one replica, a 25%/25% rolling update, ten revisions kept, a
// 600s progress deadline), its spec validation, the immutable selector, the
// scale subresource and the READY/UP-TO-DATE/AVAILABLE columns.
package deployment

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Resource describes deployments.
func Resource() *registry.Resource {
	columns := workload.Columns([]registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ready", Type: "string",
			Description: "Number of the pod with ready state"},
			Cell: func(o runtime.Object) interface{} {
				d := o.(*appsv1.Deployment)
				return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, workload.Replicas(d))
			}},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Up-to-date", Type: "string",
			Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(o.(*appsv1.Deployment).Status.UpdatedReplicas) }},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Available", Type: "string",
			Description: extensionsv1beta1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
			Cell: func(o runtime.Object) interface{} { return int64(o.(*appsv1.Deployment).Status.AvailableReplicas) }},
	}, workload.SelectorColumn(extensionsv1beta1.DeploymentSpec{}.SwaggerDoc()["selector"], workload.SelectorString))
	return workload.Resource(&registry.Resource{
		Kind:       appsv1.SchemeGroupVersion.WithKind("Deployment"),
		Resource:   "deployments",
		Singular:   "deployment",
		ShortNames: []string{"deploy"},
		Strategy:   strategy{},
		Columns:    columns,
		// The deployment controller writes its revision annotation
		// through the status, which must not bump the generation.
	})
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_Deployment.
func (strategy) Default(obj runtime.Object) {
	d := obj.(*appsv1.Deployment)
	workload.DefaultInt32(&d.Spec.Replicas, 1)
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = &quarter
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = &quarter
		}
	}
	workload.DefaultInt32(&d.Spec.RevisionHistoryLimit, 10)
	workload.DefaultInt32(&d.Spec.ProgressDeadlineSeconds, 600)
	workload.DefaultTemplate(&d.Spec.Template)
}

// PrepareForUpdate bumps the generation on an annotation-only change, as
// upstream does because annotations are copied to the ReplicaSets; spec
// changes are bumped by the API server.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	d, oldD := obj.(*appsv1.Deployment), old.(*appsv1.Deployment)
	if apiequality.Semantic.DeepEqual(d.Spec, oldD.Spec) && !apiequality.Semantic.DeepEqual(d.Annotations, oldD.Annotations) {
		d.Generation = oldD.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the labels, as upstream's Deployment
// status strategy: a status write stores annotations (the deployment
// controller records the revision that way) but not labels.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	obj.(*appsv1.Deployment).Labels = old.(*appsv1.Deployment).Labels
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*appsv1.Deployment).Spec, field.NewPath("spec"))
}

// ValidateUpdate adds the apps/v1 rule that the selector never changes.
func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return append(s.Validate(obj), workload.ValidateSelectorUnchanged(obj, old)...)
}

// validateSpec follows upstream's ValidateDeploymentSpec.
func validateSpec(spec *appsv1.DeploymentSpec, fldPath *field.Path) field.ErrorList {
	errs := workload.ValidateReplicas(spec.Replicas, fldPath.Child("replicas"))
	errs = append(errs, workload.ValidateSelectorAndTemplate(spec.Selector, &spec.Template, workload.DeploymentRules, fldPath)...)
	errs = append(errs, validateStrategy(&spec.Strategy, fldPath.Child("strategy"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	if spec.ProgressDeadlineSeconds != nil {
		p := fldPath.Child("progressDeadlineSeconds")
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.ProgressDeadlineSeconds), p)...)
		if *spec.ProgressDeadlineSeconds <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(p, spec.ProgressDeadlineSeconds, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateStrategy(s *appsv1.DeploymentStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(fldPath.Child("rollingUpdate"),
				"may not be specified when strategy `type` is '"+string(appsv1.RecreateDeploymentStrategyType)+"'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		return field.ErrorList{field.NotSupported(fldPath, s, []string{
			string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
	return nil
}

// validateRollingUpdate follows upstream's ValidateRollingUpdateDeployment.
func validateRollingUpdate(ru *appsv1.RollingUpdateDeployment, fldPath *field.Path) field.ErrorList {
	var unavailable, surge intstr.IntOrString
	if ru.MaxUnavailable != nil {
		unavailable = *ru.MaxUnavailable
	}
	if ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	unavailablePath := fldPath.Child("maxUnavailable")
	errs := workload.ValidateIntOrPercent(unavailable, unavailablePath)
	errs = append(errs, workload.ValidateIntOrPercent(surge, fldPath.Child("maxSurge"))...)
	if workload.IntOrPercentValue(unavailable) == 0 && workload.IntOrPercentValue(surge) == 0 {
		errs = append(errs, field.Invalid(unavailablePath, unavailable, "may not be 0 when `maxSurge` is 0"))
	}
	return append(errs, workload.NotMoreThan100Percent(unavailable, unavailablePath)...)
}
