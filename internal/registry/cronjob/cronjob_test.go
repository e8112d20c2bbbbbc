package cronjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *batchv1.CronJob {
	c := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: batchv1.CronJobSpec{Schedule: "*/1 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers: []corev1.Container{{Name: "hello", Image: "busybox"}}}},
		}}},
	}
	return registrytest.Created(strategy{}, c)
}

func TestDefault(t *testing.T) {
	s := valid().Spec
	if s.ConcurrencyPolicy != batchv1.AllowConcurrent || *s.Suspend || *s.SuccessfulJobsHistoryLimit != 3 || *s.FailedJobsHistoryLimit != 1 {
		t.Errorf("defaults: %+v", s)
	}
	if s.JobTemplate.Spec.BackoffLimit != nil || s.JobTemplate.Spec.Selector != nil {
		t.Errorf("the job template got a Job's defaults: %+v", s.JobTemplate.Spec)
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*batchv1.CronJob]{
		{Name: "valid", Change: func(*batchv1.CronJob) {}},
		{Name: "time zone", Change: func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Europe/Paris") }},
		{Name: "bad schedule", Change: func(c *batchv1.CronJob) { c.Spec.Schedule = "every minute" },
			Want: []string{`spec.schedule: Invalid value: "every minute": expected exactly 5 fields, found 2: [every minute]`}},
		{Name: "TZ in schedule", Change: func(c *batchv1.CronJob) { c.Spec.Schedule = "TZ=UTC 0 * * * *" },
			Want: []string{`spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`}},
		{Name: "unknown time zone", Change: func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Mars/Olympus") },
			Want: []string{`spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus`}},
		{Name: "local time zone", Change: func(c *batchv1.CronJob) { c.Spec.TimeZone = ptr.To("Local") },
			Want: []string{`spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones`}},
		{Name: "bad policy", Change: func(c *batchv1.CronJob) { c.Spec.ConcurrencyPolicy = "Sometimes" },
			Want: []string{`spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"`}},
		{Name: "selector in template", Change: func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, Want: []string{`spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: ` + "`selector` will be auto-generated"}},
		{Name: "template restart policy", Change: func(c *batchv1.CronJob) {
			c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, Want: []string{`spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`}},
		{Name: "long name", Change: func(c *batchv1.CronJob) { c.Name = "a23456789012345678901234567890123456789012345678901234" },
			Want: []string{`metadata.name: Invalid value: "a23456789012345678901234567890123456789012345678901234": must be no more than 52 characters`}},
	})
}

func TestColumns(t *testing.T) {
	c := valid()
	last := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	c.Status = batchv1.CronJobStatus{LastScheduleTime: &last, Active: []corev1.ObjectReference{{Name: "hello-1"}}}
	registrytest.ExpectRow(t, Resource().Columns[:7], c,
		[]string{"Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"},
		[]interface{}{"hello", "*/1 * * * *", "<none>", "False", int64(1), "2m", "<unknown>"})
	if got := registrytest.Names(Resource().Columns[7:]); len(got) != 3 || got[2] != "Selector" {
		t.Errorf("wide columns %v", got)
	}
}
