// Package job is the batch/v1 Job strategy: upstream's defaults
// (completions and parallelism 1, backoffLimit 6, NonIndexed, not
// suspended, the pod replacement policy), the generated selector on
// batch.kubernetes.io/controller-uid with the job-name and controller-uid
// template labels, upstream's spec, update and status validation, and the
// STATUS/COMPLETIONS/DURATION columns. Its spec rules are shared with the
// CronJob's job template.
package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// Upstream's limits of a Job spec.
const (
	maxParallelismForIndexedJob       = 100000
	maxFailedIndexesForIndexedJob     = 100_000
	completionsSoftLimit              = 100_000
	parallelismLimitForHighCompletion = 10_000
	maxFailedIndexesForHighCompletion = 10_000
	maxPodFailurePolicyRules          = 20
	maxOnExitCodesValues              = 255
	maxOnPodConditionsPatterns        = 20
	maxManagedByLength                = 63
	maxSucceededIndexesLength         = 64 * 1024
	maxSuccessPolicyRules             = 20
)

// The unprefixed template labels upstream's strategy still adds beside the
// batch.kubernetes.io/ ones.
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

// Resource describes jobs.
func Resource() *registry.Resource {
	template := func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*batchv1.Job).Spec.Template }
	columns := []registry.Column{
		registry.NameColumn(),
		registry.TextColumn("Status", "Status of the job.", Status),
		registry.TextColumn("Completions", batchv1.JobStatus{}.SwaggerDoc()["succeeded"], completions),
		registry.TextColumn("Duration", "Time required to complete the job.", jobDuration),
		registry.AgeColumn(),
	}
	columns = append(columns, workload.ContainerColumns(template)...)
	columns = append(columns, registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1,
			Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		Cell: func(o runtime.Object) interface{} { return metav1.FormatLabelSelector(o.(*batchv1.Job).Spec.Selector) },
	})
	return &registry.Resource{
		Kind:       batchv1.SchemeGroupVersion.WithKind("Job"),
		Resource:   "jobs",
		Singular:   "job",
		Categories: []string{"all"},
		Namespaced: true,
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		Columns:    columns,
		Fields: func(o runtime.Object) fields.Set {
			return fields.Set{"status.successful": strconv.Itoa(int(o.(*batchv1.Job).Status.Succeeded))}
		},
	}
}

// Status is the STATUS column, as upstream's printer words it.
func Status(j *batchv1.Job) string {
	switch {
	case HasCondition(j, batchv1.JobComplete):
		return "Complete"
	case HasCondition(j, batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case HasCondition(j, batchv1.JobSuspended):
		return "Suspended"
	case HasCondition(j, batchv1.JobFailureTarget):
		return "FailureTarget"
	case HasCondition(j, batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func completions(j *batchv1.Job) string {
	if j.Spec.Completions != nil {
		return fmt.Sprintf("%d/%d", j.Status.Succeeded, *j.Spec.Completions)
	}
	if p := ptr.Deref(j.Spec.Parallelism, 0); p > 1 {
		return fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, p)
	}
	return fmt.Sprintf("%d/1", j.Status.Succeeded)
}

func jobDuration(j *batchv1.Job) string {
	switch {
	case j.Status.StartTime == nil:
		return ""
	case j.Status.CompletionTime == nil:
		return duration.HumanDuration(time.Since(j.Status.StartTime.Time))
	}
	return duration.HumanDuration(j.Status.CompletionTime.Sub(j.Status.StartTime.Time))
}

// HasCondition says whether the job's first condition of type t is True,
// as upstream's printer reads it.
func HasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// conditionTrue says whether any condition of type t is True.
func conditionTrue(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func conditionFalse(conds []batchv1.JobCondition, t batchv1.JobConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// Finished says whether the job has a True Complete or Failed condition.
func Finished(j *batchv1.Job) bool {
	return conditionTrue(j.Status.Conditions, batchv1.JobComplete) || conditionTrue(j.Status.Conditions, batchv1.JobFailed)
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_Job and the defaults of the pod
// template it holds.
func (strategy) Default(obj runtime.Object) {
	j := obj.(*batchv1.Job)
	spec := &j.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To[int32](1)
	}
	workload.DefaultInt32(&spec.Parallelism, 1)
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
		} else {
			spec.BackoffLimit = ptr.To[int32](6)
		}
	}
	if l := spec.Template.Labels; l != nil && len(j.Labels) == 0 {
		j.Labels = l
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.PodReplacementPolicy == nil {
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	if spec.ManualSelector == nil {
		spec.ManualSelector = ptr.To(false)
	}
	DefaultTemplate(spec)
}

// DefaultTemplate fills what every job spec, a Job's or a CronJob's
// template, is defaulted with: the pod template's defaults and the status
// of the pod failure policy's condition patterns.
func DefaultTemplate(spec *batchv1.JobSpec) {
	if spec.PodFailurePolicy != nil {
		for i := range spec.PodFailurePolicy.Rules {
			for k := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
				if p := &spec.PodFailurePolicy.Rules[i].OnPodConditions[k]; p.Status == "" {
					p.Status = corev1.ConditionTrue
				}
			}
		}
	}
	workload.DefaultTemplate(&spec.Template)
}

// PrepareForCreate generates the selector unless spec.manualSelector is
// set, as upstream's strategy.
func (strategy) PrepareForCreate(obj runtime.Object) {
	j := obj.(*batchv1.Job)
	if !ptr.Deref(j.Spec.ManualSelector, false) {
		generateSelector(j)
	}
}

// generateSelector labels the template with the job's name and UID (the
// legacy and the batch.kubernetes.io/ keys, leaving labels the user set for
// validation to judge) and selects the batch.kubernetes.io/controller-uid.
func generateSelector(j *batchv1.Job) {
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for key, value := range map[string]string{
		legacyJobNameLabel:         j.Name,
		batchv1.JobNameLabel:       j.Name,
		legacyControllerUIDLabel:   string(j.UID),
		batchv1.ControllerUidLabel: string(j.UID),
	} {
		if _, set := j.Spec.Template.Labels[key]; !set {
			j.Spec.Template.Labels[key] = value
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, set := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !set {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	j := obj.(*batchv1.Job)
	errs := validateGeneratedSelector(j, true)
	errs = append(errs, validateSpecWithSelector(&j.Spec, field.NewPath("spec"))...)
	return append(errs, validateNameAllowsCompletions(j)...)
}

// ValidateUpdate checks a write of the object, and, when the status
// changed (a write of the status subresource), the status transition.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	j, oldJ := obj.(*batchv1.Job), old.(*batchv1.Job)
	errs := validateSpecUpdate(j, oldJ)
	errs = append(errs, validateNameAllowsCompletions(j)...)
	if !apiequality.Semantic.DeepEqual(j.Status, oldJ.Status) {
		errs = append(errs, validateStatusUpdate(j, oldJ)...)
	}
	return errs
}

// validateGeneratedSelector follows upstream's: a job without a manual
// selector carries its generated labels and selects them.
func validateGeneratedSelector(j *batchv1.Job, prefixedLabels bool) field.ErrorList {
	if ptr.Deref(j.Spec.ManualSelector, false) || j.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if j.UID == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	tmplPath := field.NewPath("spec", "template", "metadata")
	hasLabel := func(key, value string) {
		errs = append(errs, validateHasLabel(j.Spec.Template.Labels, tmplPath, key, value)...)
	}
	hasLabel(legacyControllerUIDLabel, string(j.UID))
	hasLabel(legacyJobNameLabel, j.Name)
	expected := labels.Set{legacyControllerUIDLabel: string(j.UID), legacyJobNameLabel: j.Name}
	if prefixedLabels {
		hasLabel(batchv1.ControllerUidLabel, string(j.UID))
		hasLabel(batchv1.JobNameLabel, j.Name)
		expected[batchv1.ControllerUidLabel] = string(j.UID)
		expected[batchv1.JobNameLabel] = j.Name
	}
	if selector, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !selector.Matches(expected) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), j.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

// validateHasLabel is upstream's ValidateHasLabel.
func validateHasLabel(l map[string]string, fldPath *field.Path, key, expected string) field.ErrorList {
	actual, found := l[key]
	if !found {
		return field.ErrorList{field.Required(fldPath.Child("labels").Key(key), "must be '"+expected+"'")}
	}
	if actual != expected {
		return field.ErrorList{field.Invalid(fldPath.Child("labels").Key(key), l, "must be '"+expected+"'")}
	}
	return nil
}

// validateNameAllowsCompletions checks that the last index's hostname of
// an Indexed job is a DNS label.
func validateNameAllowsCompletions(j *batchv1.Job) field.ErrorList {
	if ptr.Deref(j.Spec.CompletionMode, "") != batchv1.IndexedCompletion || ptr.Deref(j.Spec.Completions, 0) <= 0 {
		return nil
	}
	hostname := fmt.Sprintf("%s-%d", j.Name, *j.Spec.Completions-1)
	if len(utilvalidation.IsDNS1123Label(hostname)) > 0 {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), j.Name,
			"will not able to create pod with invalid DNS label: "+hostname)}
	}
	return nil
}

// validateSpecWithSelector is upstream's ValidateJobSpec: the spec rules,
// a required valid selector that matches the template's labels.
func validateSpecWithSelector(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	errs := ValidateSpec(spec, fldPath)
	if spec.Selector == nil {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, fldPath.Child("selector"))...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && !selector.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	return errs
}

// ValidateSpec checks a job spec as upstream's validateJobSpec, the rules
// a Job and a CronJob's job template share.
func ValidateSpec(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(v *int32, name string) {
		if v != nil {
			errs = append(errs, validation.ValidateNonnegativeField(int64(*v), fldPath.Child(name))...)
		}
	}
	nonNegative(spec.Parallelism, "parallelism")
	nonNegative(spec.Completions, "completions")
	if spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, validation.ValidateNonnegativeField(*spec.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	nonNegative(spec.BackoffLimit, "backoffLimit")
	nonNegative(spec.TTLSecondsAfterFinished, "ttlSecondsAfterFinished")
	nonNegative(spec.BackoffLimitPerIndex, "backoffLimitPerIndex")
	if spec.MaxFailedIndexes != nil {
		nonNegative(spec.MaxFailedIndexes, "maxFailedIndexes")
		if spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}
	if spec.ManagedBy != nil {
		errs = append(errs, utilvalidation.IsDomainPrefixedPath(fldPath.Child("managedBy"), *spec.ManagedBy)...)
		if len(*spec.ManagedBy) > maxManagedByLength {
			errs = append(errs, field.TooLong(fldPath.Child("managedBy"), "", maxManagedByLength))
		}
	}
	errs = append(errs, validateCompletionMode(spec, fldPath)...)
	if spec.PodFailurePolicy != nil {
		errs = append(errs, validatePodFailurePolicy(spec, fldPath.Child("podFailurePolicy"))...)
	}
	if spec.SuccessPolicy != nil {
		if ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion) != batchv1.IndexedCompletion {
			errs = append(errs, field.Invalid(fldPath.Child("successPolicy"), *spec.SuccessPolicy, "requires indexed completion mode"))
		} else {
			errs = append(errs, validateSuccessPolicy(spec, fldPath.Child("successPolicy"))...)
		}
	}
	if p := spec.PodReplacementPolicy; p != nil {
		switch {
		case spec.PodFailurePolicy != nil && *p != batchv1.Failed:
			errs = append(errs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *p, []batchv1.PodReplacementPolicy{batchv1.Failed}))
		case spec.PodFailurePolicy == nil && *p != batchv1.Failed && *p != batchv1.TerminatingOrFailed:
			errs = append(errs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *p,
				[]batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed}))
		}
	}
	if workload.ValidatePodTemplate != nil {
		errs = append(errs, workload.ValidatePodTemplate(&spec.Template, fldPath.Child("template"))...)
	}
	restartPath := fldPath.Child("template", "spec", "restartPolicy")
	switch rp := spec.Template.Spec.RestartPolicy; {
	case rp == corev1.RestartPolicyAlways || rp == "":
		errs = append(errs, field.Required(restartPath, fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(restartPath, rp, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	case spec.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(restartPath, rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return errs
}

func validateCompletionMode(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mode := ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion)
	if spec.CompletionMode != nil && mode != batchv1.NonIndexedCompletion && mode != batchv1.IndexedCompletion {
		errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), spec.CompletionMode,
			[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
	}
	switch mode {
	case batchv1.IndexedCompletion:
		if spec.Completions == nil {
			errs = append(errs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
		}
		if spec.Parallelism != nil && *spec.Parallelism > maxParallelismForIndexedJob {
			errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
				fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
		}
		if spec.Completions != nil && spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > *spec.Completions {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "must be less than or equal to completions"))
		}
		if spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > maxFailedIndexesForIndexedJob {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
				fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForIndexedJob)))
		}
		if spec.Completions != nil && *spec.Completions > completionsSoftLimit && spec.BackoffLimitPerIndex != nil {
			suffix := fmt.Sprintf(" when completions are above %d and used with backoff limit per index", completionsSoftLimit)
			if spec.MaxFailedIndexes == nil {
				errs = append(errs, field.Required(fldPath.Child("maxFailedIndexes"), fmt.Sprintf("must be specified when completions is above %d", completionsSoftLimit)))
			}
			if spec.Parallelism != nil && *spec.Parallelism > parallelismLimitForHighCompletion {
				errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *spec.Parallelism,
					fmt.Sprintf("must be less than or equal to %d", parallelismLimitForHighCompletion)+suffix))
			}
			if spec.MaxFailedIndexes != nil && *spec.MaxFailedIndexes > maxFailedIndexesForHighCompletion {
				errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes,
					fmt.Sprintf("must be less than or equal to %d", maxFailedIndexesForHighCompletion)+suffix))
			}
		}
	case batchv1.NonIndexedCompletion:
		if spec.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if spec.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *spec.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	return errs
}

var (
	failurePolicyActions = []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionCount,
		batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore}
	exitCodeOperators = []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn,
		batchv1.PodFailurePolicyOnExitCodesOpNotIn}
	conditionStatuses = []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionUnknown}
)

func validatePodFailurePolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	if n := len(spec.PodFailurePolicy.Rules); n > maxPodFailurePolicyRules {
		errs = append(errs, field.TooMany(rulesPath, n, maxPodFailurePolicyRules))
	}
	containers := sets.New[string]()
	for _, c := range spec.Template.Spec.Containers {
		containers.Insert(c.Name)
	}
	for _, c := range spec.Template.Spec.InitContainers {
		containers.Insert(c.Name)
	}
	for i := range spec.PodFailurePolicy.Rules {
		errs = append(errs, validatePodFailurePolicyRule(spec, &spec.PodFailurePolicy.Rules[i], rulesPath.Index(i), containers)...)
	}
	return errs
}

func validatePodFailurePolicyRule(spec *batchv1.JobSpec, rule *batchv1.PodFailurePolicyRule, rulePath *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	actionPath := rulePath.Child("action")
	switch {
	case rule.Action == "":
		errs = append(errs, field.Required(actionPath, fmt.Sprintf("valid values: %q", failurePolicyActions)))
	case rule.Action == batchv1.PodFailurePolicyActionFailIndex:
		if spec.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Invalid(actionPath, rule.Action, "requires the backoffLimitPerIndex to be set"))
		}
	case !slices.Contains(failurePolicyActions, rule.Action):
		errs = append(errs, field.NotSupported(actionPath, rule.Action, failurePolicyActions))
	}
	if rule.OnExitCodes != nil {
		errs = append(errs, validateOnExitCodes(rule.OnExitCodes, rulePath.Child("onExitCodes"), containers)...)
	}
	if n := len(rule.OnPodConditions); n > 0 {
		p := rulePath.Child("onPodConditions")
		if n > maxOnPodConditionsPatterns {
			errs = append(errs, field.TooMany(p, n, maxOnPodConditionsPatterns))
		}
		for j, pattern := range rule.OnPodConditions {
			pp := p.Index(j)
			for _, msg := range utilvalidation.IsQualifiedName(string(pattern.Type)) {
				errs = append(errs, field.Invalid(pp.Child("type"), pattern.Type, msg))
			}
			switch {
			case pattern.Status == "":
				errs = append(errs, field.Required(pp.Child("status"), fmt.Sprintf("valid values: %q", conditionStatuses)))
			case !slices.Contains(conditionStatuses, pattern.Status):
				errs = append(errs, field.NotSupported(pp.Child("status"), pattern.Status, conditionStatuses))
			}
		}
	}
	switch {
	case rule.OnExitCodes != nil && len(rule.OnPodConditions) > 0:
		errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	case rule.OnExitCodes == nil && len(rule.OnPodConditions) == 0:
		errs = append(errs, field.Invalid(rulePath, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return errs
}

func validateOnExitCodes(req *batchv1.PodFailurePolicyOnExitCodesRequirement, fldPath *field.Path, containers sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	opPath := fldPath.Child("operator")
	switch {
	case req.Operator == "":
		errs = append(errs, field.Required(opPath, fmt.Sprintf("valid values: %q", exitCodeOperators)))
	case !slices.Contains(exitCodeOperators, req.Operator):
		errs = append(errs, field.NotSupported(opPath, req.Operator, exitCodeOperators))
	}
	if req.ContainerName != nil && !containers.Has(*req.ContainerName) {
		errs = append(errs, field.Invalid(fldPath.Child("containerName"), *req.ContainerName,
			"must be one of the container or initContainer names in the pod template"))
	}
	valuesPath := fldPath.Child("values")
	switch n := len(req.Values); {
	case n == 0:
		errs = append(errs, field.Invalid(valuesPath, req.Values, "at least one value is required"))
	case n > maxOnExitCodesValues:
		errs = append(errs, field.TooMany(valuesPath, n, maxOnExitCodesValues))
	}
	ordered := true
	seen := sets.New[int32]()
	for j, v := range req.Values {
		if req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(valuesPath.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen.Has(v) {
			errs = append(errs, field.Duplicate(valuesPath.Index(j), v))
		}
		seen.Insert(v)
		if j > 0 && req.Values[j-1] > v {
			ordered = false
		}
	}
	if !ordered {
		errs = append(errs, field.Invalid(valuesPath, req.Values, "must be ordered"))
	}
	return errs
}

func validateSuccessPolicy(spec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rulesPath := fldPath.Child("rules")
	rules := spec.SuccessPolicy.Rules
	if len(rules) == 0 {
		errs = append(errs, field.Required(rulesPath, "at least one rules must be specified when the successPolicy is specified"))
	}
	if len(rules) > maxSuccessPolicyRules {
		errs = append(errs, field.TooMany(rulesPath, len(rules), maxSuccessPolicyRules))
	}
	completions := ptr.Deref(spec.Completions, 0)
	for i, rule := range rules {
		p := rulesPath.Index(i)
		if rule.SucceededCount == nil && rule.SucceededIndexes == nil {
			errs = append(errs, field.Required(p, "at least one of succeededCount or succeededIndexes must be specified"))
		}
		var total int32
		if rule.SucceededIndexes != nil {
			ip := p.Child("succeededIndexes")
			if len(*rule.SucceededIndexes) > maxSucceededIndexesLength {
				errs = append(errs, field.TooLong(ip, "", maxSucceededIndexesLength))
			}
			var err error
			if total, err = CountIndexes(*rule.SucceededIndexes, completions); err != nil {
				errs = append(errs, field.Invalid(ip, *rule.SucceededIndexes, "error parsing succeededIndexes: "+err.Error()))
			}
		}
		if rule.SucceededCount != nil {
			cp := p.Child("succeededCount")
			errs = append(errs, validation.ValidateNonnegativeField(int64(*rule.SucceededCount), cp)...)
			if *rule.SucceededCount > completions {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount,
					fmt.Sprintf("must be less than or equal to %d (the number of specified completions)", completions)))
			}
			if rule.SucceededIndexes != nil && *rule.SucceededCount > total {
				errs = append(errs, field.Invalid(cp, *rule.SucceededCount,
					fmt.Sprintf("must be less than or equal to %d (the number of indexes in the specified succeededIndexes field)", total)))
			}
		}
	}
	return errs
}

// validateSpecUpdate follows upstream's ValidateJobSpecUpdate.
func validateSpecUpdate(j, old *batchv1.Job) field.ErrorList {
	spec, oldSpec := &j.Spec, &old.Spec
	fldPath := field.NewPath("spec")
	// Jobs stored before the batch.kubernetes.io/ labels keep passing.
	_, hadName := oldSpec.Template.Labels[batchv1.JobNameLabel]
	_, hadUID := oldSpec.Template.Labels[batchv1.ControllerUidLabel]
	errs := validateGeneratedSelector(j, hadName && hadUID)
	errs = append(errs, validateSpecWithSelector(spec, fldPath)...)
	if ptr.Deref(spec.CompletionMode, "") == batchv1.IndexedCompletion {
		if !ptr.Equal(spec.Completions, oldSpec.Completions) && spec.Completions != nil && !ptr.Equal(spec.Completions, spec.Parallelism) {
			errs = append(errs, field.Invalid(fldPath.Child("completions"), spec.Completions, "can only be modified in tandem with spec.parallelism"))
		}
	} else {
		errs = append(errs, validation.ValidateImmutableField(spec.Completions, oldSpec.Completions, fldPath.Child("completions"))...)
	}
	errs = append(errs, validation.ValidateImmutableField(spec.Selector, oldSpec.Selector, fldPath.Child("selector"))...)
	errs = append(errs, validateTemplateUpdate(old, spec, oldSpec, fldPath)...)
	errs = append(errs, validation.ValidateImmutableField(spec.CompletionMode, oldSpec.CompletionMode, fldPath.Child("completionMode"))...)
	errs = append(errs, validation.ValidateImmutableField(spec.PodFailurePolicy, oldSpec.PodFailurePolicy, fldPath.Child("podFailurePolicy"))...)
	errs = append(errs, validation.ValidateImmutableField(spec.BackoffLimitPerIndex, oldSpec.BackoffLimitPerIndex, fldPath.Child("backoffLimitPerIndex"))...)
	errs = append(errs, validation.ValidateImmutableField(spec.ManagedBy, oldSpec.ManagedBy, fldPath.Child("managedBy"))...)
	return append(errs, validation.ValidateImmutableField(spec.SuccessPolicy, oldSpec.SuccessPolicy, fldPath.Child("successPolicy"))...)
}

// validateTemplateUpdate keeps the pod template immutable, except that a
// suspended job that has no active pods and never ran (or was suspended
// since) may change its scheduling directives and container resources,
// as upstream with MutableSchedulingDirectivesForSuspendedJobs and
// MutablePodResourcesForSuspendedJobs (on by default).
func validateTemplateUpdate(old *batchv1.Job, spec, oldSpec *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	suspended := ptr.Deref(oldSpec.Suspend, false)
	mutable := suspended && (old.Status.StartTime == nil || conditionTrue(old.Status.Conditions, batchv1.JobSuspended)) && old.Status.Active == 0
	if !mutable {
		return validation.ValidateImmutableField(&spec.Template, &oldSpec.Template, fldPath.Child("template"))
	}
	t, o := &spec.Template, oldSpec.Template.DeepCopy()
	switch {
	case t.Spec.Affinity == nil && o.Spec.Affinity != nil:
		o.Spec.Affinity.NodeAffinity = nil
		if *o.Spec.Affinity == (corev1.Affinity{}) {
			o.Spec.Affinity = nil
		}
	case t.Spec.Affinity != nil && o.Spec.Affinity == nil:
		o.Spec.Affinity = &corev1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
	case t.Spec.Affinity != nil && o.Spec.Affinity != nil:
		o.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
	}
	o.Spec.NodeSelector = t.Spec.NodeSelector
	o.Spec.Tolerations = t.Spec.Tolerations
	o.Annotations = t.Annotations
	o.Labels = t.Labels
	o.Spec.SchedulingGates = t.Spec.SchedulingGates
	copyResources := func(cur, old []corev1.Container) {
		if len(cur) != len(old) {
			return
		}
		for i := range cur {
			if cur[i].Name == old[i].Name {
				old[i].Resources = cur[i].Resources
			}
		}
	}
	copyResources(t.Spec.Containers, o.Spec.Containers)
	copyResources(t.Spec.InitContainers, o.Spec.InitContainers)
	return validation.ValidateImmutableField(t.Spec, o.Spec, fldPath.Child("template.spec"))
}

// validateStatusUpdate follows upstream's status validation with
// JobManagedBy (GA): each rule applies when the fields it reads changed.
func validateStatusUpdate(j, old *batchv1.Job) field.ErrorList {
	var errs field.ErrorList
	st, ost := &j.Status, &old.Status
	p := field.NewPath("status")
	errs = append(errs, validation.ValidateNonnegativeField(int64(st.Active), p.Child("active"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(st.Succeeded), p.Child("succeeded"))...)
	errs = append(errs, validation.ValidateNonnegativeField(int64(st.Failed), p.Child("failed"))...)
	if st.Ready != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*st.Ready), p.Child("ready"))...)
	}
	if st.Terminating != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*st.Terminating), p.Child("terminating"))...)
	}
	conds, oconds := st.Conditions, ost.Conditions
	complete, failed := conditionTrue(conds, batchv1.JobComplete), conditionTrue(conds, batchv1.JobFailed)
	failureTarget, successMet := conditionTrue(conds, batchv1.JobFailureTarget), conditionTrue(conds, batchv1.JobSuccessCriteriaMet)
	finished := complete || failed
	completeChanged := complete != conditionTrue(oconds, batchv1.JobComplete)
	failedChanged := failed != conditionTrue(oconds, batchv1.JobFailed)
	finishedChanged := finished != Finished(old)
	condPath := p.Child("conditions")
	invalid := func(path *field.Path, value interface{}, msg string) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	if (completeChanged || failedChanged) && complete && failed {
		invalid(condPath, field.OmitValueType{}, "cannot set Complete=True and Failed=true conditions")
	}
	if (completeChanged || failureTarget != conditionTrue(oconds, batchv1.JobFailureTarget)) && complete && failureTarget {
		invalid(condPath, field.OmitValueType{}, "cannot set Complete=True and FailureTarget=true conditions")
	}
	completionTimeChanged := !ptr.Equal(st.CompletionTime, ost.CompletionTime)
	if (completeChanged || completionTimeChanged) && st.CompletionTime != nil && !complete {
		invalid(p.Child("completionTime"), st.CompletionTime, "cannot set completionTime when there is no Complete=True condition")
	}
	if (completeChanged || completionTimeChanged) && st.CompletionTime == nil && complete {
		errs = append(errs, field.Required(p.Child("completionTime"), "completionTime is required for Complete jobs"))
	}
	if failedChanged && failed && !failureTarget {
		invalid(condPath, field.OmitValueType{}, "cannot set Failed=True condition without the FailureTarget=true condition")
	}
	if (completeChanged || successMet != conditionTrue(oconds, batchv1.JobSuccessCriteriaMet)) && complete && !successMet {
		invalid(condPath, field.OmitValueType{}, "cannot set Complete=True condition without the SuccessCriteriaMet=true condition")
	}
	if (finishedChanged || st.Active != ost.Active) && finished && st.Active > 0 {
		invalid(p.Child("active"), st.Active, "active>0 is invalid for finished job")
	}
	if (finishedChanged || !ptr.Equal(st.StartTime, ost.StartTime)) && finished && st.StartTime == nil &&
		!(ptr.Deref(j.Spec.Suspend, false) && ptr.Deref(j.Spec.Completions, -1) == 0) {
		errs = append(errs, field.Required(p.Child("startTime"), "startTime is required for finished job"))
	}
	if u := st.UncountedTerminatedPods; finished && u != nil && len(u.Failed)+len(u.Succeeded) > 0 {
		invalid(p.Child("uncountedTerminatedPods"), u, "must be empty for finished job")
	}
	if st.CompletedIndexes != ost.CompletedIndexes && j.Spec.Completions != nil {
		if _, err := CountIndexes(st.CompletedIndexes, *j.Spec.Completions); err != nil {
			invalid(p.Child("completedIndexes"), st.CompletedIndexes, "error parsing completedIndexes: "+err.Error())
		}
		if st.CompletedIndexes != "" && ptr.Deref(j.Spec.CompletionMode, "") != batchv1.IndexedCompletion {
			invalid(p.Child("completedIndexes"), st.CompletedIndexes, "cannot set non-empty completedIndexes when non-indexed completion mode")
		}
	}
	if (finishedChanged || !ptr.Equal(st.Terminating, ost.Terminating)) && finished && ptr.Deref(st.Terminating, 0) > 0 {
		invalid(p.Child("terminating"), st.Terminating, "terminating>0 is invalid for finished job")
	}
	if (!ptr.Equal(st.Ready, ost.Ready) || st.Active != ost.Active) && ptr.Deref(st.Ready, 0) > st.Active {
		invalid(p.Child("ready"), *st.Ready, "cannot set more ready pods than active")
	}
	if successMet && failed {
		invalid(condPath, field.OmitValueType{}, "cannot set SuccessCriteriaMet=True and Failed=true conditions")
	}
	if successMet && failureTarget {
		invalid(condPath, field.OmitValueType{}, "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions")
	}
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobComplete, batchv1.JobFailureTarget} {
		if conditionTrue(oconds, t) && !conditionTrue(conds, t) {
			invalid(condPath, field.OmitValueType{}, fmt.Sprintf("cannot disable the terminal %s=True condition", t))
		}
	}
	if st.Failed < ost.Failed {
		invalid(p.Child("failed"), st.Failed, "cannot decrease the failed counter")
	}
	indexed := ptr.Deref(j.Spec.CompletionMode, "") == batchv1.IndexedCompletion
	if (!indexed || !ptr.Equal(j.Spec.Completions, j.Spec.Parallelism)) && st.Succeeded < ost.Succeeded {
		invalid(p.Child("succeeded"), st.Succeeded, "cannot decrease the succeeded counter")
	}
	if st.CompletionTime != nil && ost.CompletionTime != nil && !st.CompletionTime.Equal(ost.CompletionTime) {
		invalid(p.Child("completionTime"), st.CompletionTime, "field is immutable")
	}
	resuming := conditionTrue(oconds, batchv1.JobSuspended) && conditionFalse(conds, batchv1.JobSuspended)
	if ost.StartTime != nil && !ptr.Equal(ost.StartTime, st.StartTime) && !ptr.Deref(j.Spec.Suspend, false) && !resuming {
		invalid(p.Child("startTime"), st.StartTime, "field is immutable for unsuspended job once set")
	}
	if st.StartTime != nil && st.CompletionTime != nil && st.CompletionTime.Before(st.StartTime) {
		invalid(p.Child("completionTime"), st.CompletionTime, "must be equal to or after `startTime`")
	}
	if conditionTrue(oconds, batchv1.JobSuccessCriteriaMet) && !successMet {
		invalid(condPath, field.OmitValueType{}, "cannot disable the SuccessCriteriaMet=True condition")
	}
	return errs
}

// CountIndexes parses a list of indexes ("1,3-5,7") below completions, in
// increasing order, and returns how many it holds, with upstream's
// messages.
func CountIndexes(s string, completions int32) (int32, error) {
	if s == "" {
		return 0, nil
	}
	var total int32
	last := int32(-1)
	for _, interval := range strings.Split(s, ",") {
		x, y, err := parseInterval(interval, completions)
		if err != nil {
			return 0, err
		}
		if last >= x {
			return 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", last, x)
		}
		total += y - x + 1
		last = y
	}
	return total, nil
}

func parseInterval(s string, completions int32) (int32, int32, error) {
	limits := strings.Split(s, "-")
	if len(limits) > 2 {
		return 0, 0, fmt.Errorf("the fragment %q violates the requirement that an index interval can have at most two parts separated by '-'", s)
	}
	parse := func(v string) (int32, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("cannot convert string to integer for index: %q", v)
		}
		if n >= int(completions) {
			return 0, fmt.Errorf("too large index: %q", v)
		}
		return int32(n), nil
	}
	x, err := parse(limits[0])
	if err != nil {
		return 0, 0, err
	}
	if len(limits) == 1 {
		return x, x, nil
	}
	y, err := parse(limits[1])
	if err != nil {
		return 0, 0, err
	}
	if x >= y {
		return 0, 0, fmt.Errorf("non-increasing order, previous: %d, current: %d", x, y)
	}
	return x, y, nil
}
