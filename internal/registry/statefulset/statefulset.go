// Package statefulset is the apps/v1 StatefulSet strategy: upstream's
// defaults (OrderedReady, a RollingUpdate strategy with partition 0,
// Retain/Retain claim retention), its spec validation, the rule that only a
// few spec fields may change, the scale subresource and the READY column.
package statefulset

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// PersistentVolumeClaimDefaults fills the claim defaults (volumeMode, status
// phase, ...) into each of spec.volumeClaimTemplates, as upstream's
// recursive defaulting does. It is nil until the core package wires it; a
// nil hook leaves the claims alone.
var PersistentVolumeClaimDefaults func(*corev1.PersistentVolumeClaim)

// updateForbidden is upstream's message for a change to an immutable field.
const updateForbidden = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', " +
	"'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"

var rules = workload.Rules{SelectorKind: "statefulset", DeadlineKind: "StatefulSet"}

// Resource describes statefulsets.
func Resource() *registry.Resource {
	columns := workload.Columns([]registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ready", Type: "string",
			Description: "Number of the pod with ready state"},
			Cell: func(o runtime.Object) interface{} {
				return fmt.Sprintf("%d/%d", o.(*appsv1.StatefulSet).Status.ReadyReplicas, workload.Replicas(o))
			}},
	})
	return workload.Resource(&registry.Resource{
		Kind:           appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
		Resource:       "statefulsets",
		Singular:       "statefulset",
		ShortNames:     []string{"sts"},
		NameValidation: validation.NameIsDNSLabel,
		Strategy:       strategy{},
		Columns:        columns,
	})
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_StatefulSet with the
// MaxUnavailableStatefulSet gate on, as it is by default since 1.35.
func (strategy) Default(obj runtime.Object) {
	ss := obj.(*appsv1.StatefulSet)
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if spec.UpdateStrategy.Type == "" {
		spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if spec.UpdateStrategy.RollingUpdate == nil {
			spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if ru := spec.UpdateStrategy.RollingUpdate; spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil {
		workload.DefaultInt32(&ru.Partition, 0)
		if ru.MaxUnavailable == nil {
			one := intstr.FromInt32(1)
			ru.MaxUnavailable = &one
		}
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	workload.DefaultInt32(&spec.Replicas, 1)
	workload.DefaultInt32(&spec.RevisionHistoryLimit, 10)
	workload.DefaultTemplate(&spec.Template)
	if PersistentVolumeClaimDefaults != nil {
		for i := range spec.VolumeClaimTemplates {
			PersistentVolumeClaimDefaults(&spec.VolumeClaimTemplates[i])
		}
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*appsv1.StatefulSet).Spec, field.NewPath("spec"), false)
}

// ValidateUpdate validates the new spec, tolerating a serviceName that was
// already invalid when stored, and forbids changes outside the fields
// upstream lets change.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	ss, oldSS := obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet)
	errs := validateSpec(&ss.Spec, field.NewPath("spec"), len(serviceNameErrors(oldSS.Spec.ServiceName)) > 0)

	changed := ss.Spec.DeepCopy()
	changed.Replicas = oldSS.Spec.Replicas
	changed.Ordinals = oldSS.Spec.Ordinals
	changed.Template = oldSS.Spec.Template
	changed.UpdateStrategy = oldSS.Spec.UpdateStrategy
	changed.RevisionHistoryLimit = oldSS.Spec.RevisionHistoryLimit
	changed.PersistentVolumeClaimRetentionPolicy = oldSS.Spec.PersistentVolumeClaimRetentionPolicy
	changed.MinReadySeconds = oldSS.Spec.MinReadySeconds
	if !apiequality.Semantic.DeepEqual(*changed, oldSS.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), updateForbidden))
	}
	return errs
}

// validateSpec follows upstream's ValidateStatefulSetSpec.
func validateSpec(spec *appsv1.StatefulSetSpec, fldPath *field.Path, allowInvalidServiceName bool) field.ErrorList {
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(fldPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(fldPath.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	errs = append(errs, validateUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		policyPath := fldPath.Child("persistentVolumeClaimRetentionPolicy")
		errs = append(errs, validateRetention(p.WhenDeleted, policyPath.Child("whenDeleted"))...)
		errs = append(errs, validateRetention(p.WhenScaled, policyPath.Child("whenScaled"))...)
	}
	errs = append(errs, workload.ValidateReplicas(spec.Replicas, fldPath.Child("replicas"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(spec.Ordinals.Start), fldPath.Child("ordinals", "start"))...)
	}
	if !allowInvalidServiceName {
		for _, msg := range serviceNameErrors(spec.ServiceName) {
			errs = append(errs, field.Invalid(fldPath.Child("serviceName"), spec.ServiceName, msg))
		}
	}
	return append(errs, workload.ValidateSelectorAndTemplate(spec.Selector, withClaimVolumes(spec), rules, fldPath)...)
}

// withClaimVolumes is the pod template as the controller makes pods of it:
// each volume claim template is a volume of its name, which containers
// mount. (Upstream leaves the template's pod spec unchecked for want of
// this; checking it so keeps the other rules and accepts such mounts.)
func withClaimVolumes(spec *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(spec.VolumeClaimTemplates) == 0 {
		return &spec.Template
	}
	t := spec.Template.DeepCopy()
	for _, claim := range spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}
		if i := slices.IndexFunc(t.Spec.Volumes, func(x corev1.Volume) bool { return x.Name == claim.Name }); i >= 0 {
			t.Spec.Volumes[i] = v
		} else {
			t.Spec.Volumes = append(t.Spec.Volumes, v)
		}
	}
	return t
}

// serviceNameErrors checks the optional serviceName, which becomes the pods'
// subdomain and so must be a DNS-1123 label.
func serviceNameErrors(name string) []string {
	if name == "" {
		return nil
	}
	return utilvalidation.IsDNS1123Label(name)
}

func validateUpdateStrategy(s *appsv1.StatefulSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch s.Type {
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(fldPath.Child("rollingUpdate"), s.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType))}
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return validateRollingUpdate(s.RollingUpdate, fldPath.Child("rollingUpdate"))
		}
	default:
		return field.ErrorList{field.Invalid(fldPath, s, fmt.Sprintf("must be '%s' or '%s'",
			appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType))}
	}
	return nil
}

// validateRollingUpdate follows upstream's validateRollingUpdateStatefulSet.
func validateRollingUpdate(ru *appsv1.RollingUpdateStatefulSetStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ru.Partition != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*ru.Partition), fldPath.Child("partition"))...)
	}
	if ru.MaxUnavailable != nil {
		p := fldPath.Child("maxUnavailable")
		errs = append(errs, workload.ValidateIntOrPercent(*ru.MaxUnavailable, p)...)
		if workload.IntOrPercentValue(*ru.MaxUnavailable) == 0 {
			errs = append(errs, field.Invalid(p, *ru.MaxUnavailable, "cannot be 0"))
		}
		errs = append(errs, workload.NotMoreThan100Percent(*ru.MaxUnavailable, p)...)
	}
	return errs
}

func validateRetention(policy appsv1.PersistentVolumeClaimRetentionPolicyType, fldPath *field.Path) field.ErrorList {
	switch policy {
	case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		return nil
	}
	return field.ErrorList{field.NotSupported(fldPath, policy, []string{
		string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)})}
}
