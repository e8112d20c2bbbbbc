// Package cronjob is the batch/v1 CronJob strategy: upstream's defaults
// (Allow, not suspended, history limits 3 and 1), its validation (a
// standard cron schedule without TZ=, an IANA time zone, the job template
// under the Job's rules without a selector, a name short enough for the
// jobs' names) and the SCHEDULE/TIMEZONE/SUSPEND/ACTIVE/LAST SCHEDULE
// columns.
package cronjob

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	// The time zones travel with the binary, as with upstream's
	// kube-apiserver and kube-controller-manager, so that timeZone works
	// on hosts without a zoneinfo database.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/job"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// maxNameLength leaves room for the "-<minutes>" suffix of the jobs'
// names within a DNS-1035 label.
const maxNameLength = utilvalidation.DNS1035LabelMaxLength - 11

// Resource describes cronjobs.
func Resource() *registry.Resource {
	spec := func(o runtime.Object) *batchv1.CronJobSpec { return &o.(*batchv1.CronJob).Spec }
	doc := batchv1.CronJobSpec{}.SwaggerDoc()
	columns := []registry.Column{
		registry.NameColumn(),
		registry.TextColumn("Schedule", doc["schedule"], func(c *batchv1.CronJob) string { return c.Spec.Schedule }),
		registry.TextColumn("Timezone", doc["timeZone"], func(c *batchv1.CronJob) string { return ptr.Deref(c.Spec.TimeZone, "<none>") }),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Suspend", Type: "boolean", Description: doc["suspend"]},
			Cell: func(o runtime.Object) interface{} {
				if s := spec(o).Suspend; s != nil {
					return map[bool]string{true: "True", false: "False"}[*s]
				}
				return "<unset>"
			}},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Active", Type: "integer",
			Description: batchv1.CronJobStatus{}.SwaggerDoc()["active"]},
			Cell: func(o runtime.Object) interface{} { return int64(len(o.(*batchv1.CronJob).Status.Active)) }},
		registry.TextColumn("Last Schedule", batchv1.CronJobStatus{}.SwaggerDoc()["lastScheduleTime"], func(c *batchv1.CronJob) string {
			if t := c.Status.LastScheduleTime; t != nil {
				return registry.Age(*t)
			}
			return "<none>"
		}),
		registry.AgeColumn(),
	}
	columns = append(columns, workload.ContainerColumns(func(o runtime.Object) *corev1.PodTemplateSpec {
		return &spec(o).JobTemplate.Spec.Template
	})...)
	columns = append(columns, registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Selector", Type: "string", Priority: 1,
			Description: batchv1.JobSpec{}.SwaggerDoc()["selector"]},
		Cell: func(o runtime.Object) interface{} {
			return metav1.FormatLabelSelector(spec(o).JobTemplate.Spec.Selector)
		},
	})
	return &registry.Resource{
		Kind:       batchv1.SchemeGroupVersion.WithKind("CronJob"),
		Resource:   "cronjobs",
		Singular:   "cronjob",
		ShortNames: []string{"cj"},
		Categories: []string{"all"},
		Namespaced: true,
		Status:     true,
		Generation: true,
		Strategy:   strategy{},
		Columns:    columns,
	}
}

type strategy struct{ registry.Base }

// Default follows upstream's SetDefaults_CronJob; the job template gets
// the pod template's defaults, not the Job's own.
func (strategy) Default(obj runtime.Object) {
	spec := &obj.(*batchv1.CronJob).Spec
	if spec.ConcurrencyPolicy == "" {
		spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	workload.DefaultInt32(&spec.SuccessfulJobsHistoryLimit, 3)
	workload.DefaultInt32(&spec.FailedJobsHistoryLimit, 1)
	job.DefaultTemplate(&spec.JobTemplate.Spec)
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	c := obj.(*batchv1.CronJob)
	errs := validateSpec(&c.Spec, nil)
	if len(c.Name) > maxNameLength {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), c.Name, fmt.Sprintf("must be no more than %d characters", maxNameLength)))
	}
	return errs
}

func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*batchv1.CronJob).Spec, &old.(*batchv1.CronJob).Spec)
}

// validateSpec follows upstream's validateCronJobSpec; oldSpec is nil on
// create.
func validateSpec(spec, oldSpec *batchv1.CronJobSpec) field.ErrorList {
	var errs field.ErrorList
	fldPath := field.NewPath("spec")
	if spec.Schedule == "" {
		errs = append(errs, field.Required(fldPath.Child("schedule"), ""))
	} else {
		// A schedule stored with TZ= before it was refused may keep it.
		allowTZ := oldSpec != nil && strings.Contains(oldSpec.Schedule, "TZ")
		errs = append(errs, validateSchedule(spec.Schedule, allowTZ, spec.TimeZone, fldPath.Child("schedule"))...)
	}
	if spec.StartingDeadlineSeconds != nil {
		errs = append(errs, validation.ValidateNonnegativeField(*spec.StartingDeadlineSeconds, fldPath.Child("startingDeadlineSeconds"))...)
	}
	if oldSpec == nil || !ptr.Equal(oldSpec.TimeZone, spec.TimeZone) {
		errs = append(errs, validateTimeZone(spec.TimeZone, fldPath.Child("timeZone"))...)
	}
	switch p := spec.ConcurrencyPolicy; p {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	case "":
		errs = append(errs, field.Required(fldPath.Child("concurrencyPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("concurrencyPolicy"), p,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	templatePath := fldPath.Child("jobTemplate", "spec")
	tmpl := &spec.JobTemplate.Spec
	errs = append(errs, job.ValidateSpec(tmpl, templatePath)...)
	if tmpl.Selector != nil {
		errs = append(errs, field.Invalid(templatePath.Child("selector"), tmpl.Selector, "`selector` will be auto-generated"))
	}
	if ptr.Deref(tmpl.ManualSelector, false) {
		errs = append(errs, field.NotSupported(templatePath.Child("manualSelector"), tmpl.ManualSelector, []string{"nil", "false"}))
	}
	if spec.SuccessfulJobsHistoryLimit != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.SuccessfulJobsHistoryLimit), fldPath.Child("successfulJobsHistoryLimit"))...)
	}
	if spec.FailedJobsHistoryLimit != nil {
		errs = append(errs, validation.ValidateNonnegativeField(int64(*spec.FailedJobsHistoryLimit), fldPath.Child("failedJobsHistoryLimit"))...)
	}
	return errs
}

// ParseSchedule parses a standard cron schedule as upstream does
// (cron.ParseStandard), a panic of the parser reported as an error.
func ParseSchedule(schedule string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(schedule)
}

func validateSchedule(schedule string, allowTZ bool, timeZone *string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := ParseSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(fldPath, schedule, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(schedule, "TZ") && timeZone != nil:
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(schedule, "TZ"):
		errs = append(errs, field.Invalid(fldPath, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

var timeZonePart = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateTimeZone accepts an explicit IANA time zone the Go runtime knows.
func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZonePart.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, tz, "unknown time zone "+*tz)}
		}
	}
	var errs field.ErrorList
	if strings.EqualFold(*tz, "Local") {
		errs = append(errs, field.Invalid(fldPath, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		errs = append(errs, field.Invalid(fldPath, tz, err.Error()))
	}
	return errs
}
