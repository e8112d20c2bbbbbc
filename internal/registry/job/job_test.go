package job

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

// created is a job as the API server creates it: named, with a UID,
// defaulted and prepared.
func created() *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: types.UID("0b9c-uid")},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "pi", Image: "busybox"}},
		}}},
	}
	return registrytest.Created(strategy{}, j)
}

func TestDefaultAndGeneratedSelector(t *testing.T) {
	j := created()
	s := j.Spec
	if *s.Completions != 1 || *s.Parallelism != 1 || *s.BackoffLimit != 6 || *s.CompletionMode != batchv1.NonIndexedCompletion ||
		*s.Suspend || *s.PodReplacementPolicy != batchv1.TerminatingOrFailed || *s.ManualSelector {
		t.Errorf("defaults: %+v", s)
	}
	want := map[string]string{"job-name": "pi", "batch.kubernetes.io/job-name": "pi",
		"controller-uid": "0b9c-uid", "batch.kubernetes.io/controller-uid": "0b9c-uid"}
	for k, v := range want {
		if s.Template.Labels[k] != v {
			t.Errorf("template label %s = %q, want %q", k, s.Template.Labels[k], v)
		}
	}
	if got := metav1.FormatLabelSelector(s.Selector); got != "batch.kubernetes.io/controller-uid=0b9c-uid" {
		t.Errorf("selector %s", got)
	}
	registrytest.ExpectErrors(t, strategy{}.Validate(j))

	perIndex := &batchv1.Job{Spec: batchv1.JobSpec{BackoffLimitPerIndex: ptr.To[int32](1), Parallelism: ptr.To[int32](3),
		PodFailurePolicy: &batchv1.PodFailurePolicy{}}}
	strategy{}.Default(perIndex)
	if *perIndex.Spec.BackoffLimit != 1<<31-1 || perIndex.Spec.Completions != nil || *perIndex.Spec.PodReplacementPolicy != batchv1.Failed {
		t.Errorf("per-index defaults: %+v", perIndex.Spec)
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, created, []registrytest.Case[*batchv1.Job]{
		{Name: "valid", Change: func(*batchv1.Job) {}},
		{Name: "restart always", Change: func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways },
			Want: []string{`spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`}},
		{Name: "negative counts", Change: func(j *batchv1.Job) {
			j.Spec.Parallelism, j.Spec.BackoffLimit = ptr.To[int32](-1), ptr.To[int32](-2)
		}, Want: []string{"spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
			"spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0"}},
		{Name: "foreign selector", Change: func(j *batchv1.Job) {
			j.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] = "other"
		}, Want: []string{
			`spec.selector: Invalid value: {"matchLabels":{"batch.kubernetes.io/controller-uid":"other"}}: ` + "`selector` not auto-generated",
			`spec.template.metadata.labels: Invalid value: {"batch.kubernetes.io/controller-uid":"0b9c-uid","batch.kubernetes.io/job-name":"pi","controller-uid":"0b9c-uid","job-name":"pi"}: ` + "`selector` does not match template `labels`"}},
		{Name: "indexed without completions", Change: func(j *batchv1.Job) {
			j.Spec.CompletionMode, j.Spec.Completions = ptr.To(batchv1.IndexedCompletion), nil
		}, Want: []string{"spec.completions: Required value: when completion mode is Indexed"}},
		{Name: "per-index limit needs Indexed", Change: func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](1) },
			Want: []string{"spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"}},
		{Name: "pod failure policy", Change: func(j *batchv1.Job) {
			j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:      batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3, 0, 3}},
			}}}
			j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		}, Want: []string{
			"spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
			"spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [3,0,3]: must be ordered"}},
		{Name: "success policy needs Indexed", Change: func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}}
		}, Want: []string{`spec.successPolicy: Invalid value: {"rules":[{"succeededCount":1}]}: requires indexed completion mode`}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, created, []registrytest.Case[*batchv1.Job]{
		{Name: "parallelism may change", Change: func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](4) }},
		{Name: "completions are immutable", Change: func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](4) },
			Want: []string{"spec.completions: Invalid value: 4: field is immutable"}},
		{Name: "template is immutable", Change: func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "alpine" },
			Want: []string{"spec.template: Invalid value: " + templateJSON(t, "alpine") + ": field is immutable"}},
		{Name: "suspended job may change resources",
			Old: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) },
			Change: func(j *batchv1.Job) {
				j.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
			}},
		{Name: "status counters never go down",
			Old:    func(j *batchv1.Job) { j.Status.Failed = 2 },
			Change: func(j *batchv1.Job) { j.Status.Failed = 1 },
			Want:   []string{"status.failed: Invalid value: 1: cannot decrease the failed counter"}},
		{Name: "failed needs a failure target",
			Old: func(j *batchv1.Job) { j.Status.StartTime = &metav1.Time{Time: time.Unix(100, 0)} },
			Change: func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
			},
			Want: []string{"status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"}},
	})
}

// templateJSON is how the immutable-field error prints the template.
func templateJSON(t *testing.T, image string) string {
	j := created()
	j.Spec.Template.Spec.Containers[0].Image = image
	errs := strategy{}.ValidateUpdate(j, created())
	if len(errs) != 1 {
		t.Fatalf("template change: %v", errs)
	}
	v, _ := errs[0].BadValue.(*corev1.PodTemplateSpec)
	if v == nil || v.Spec.Containers[0].Image != image {
		t.Fatalf("bad value %#v", errs[0].BadValue)
	}
	s := errs[0].Error()
	const prefix, suffix = "spec.template: Invalid value: ", ": field is immutable"
	return s[len(prefix) : len(s)-len(suffix)]
}

func TestColumns(t *testing.T) {
	j := created()
	start := metav1.NewTime(time.Now().Add(-90 * time.Second))
	done := metav1.NewTime(start.Add(30 * time.Second))
	j.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &start, CompletionTime: &done,
		Conditions: []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}
	columns := Resource().Columns
	if got := registrytest.TextRow(t, columns, j); got != "pi|Complete|1/1|30s|pi|busybox|batch.kubernetes.io/controller-uid=0b9c-uid" {
		t.Errorf("row %s", got)
	}
	if got := registrytest.Names(columns); len(got) != 8 || got[1] != "Status" || got[4] != "Age" || got[7] != "Selector" {
		t.Errorf("columns %v", got)
	}
	running := created()
	running.Spec.Completions, running.Spec.Parallelism = nil, ptr.To[int32](3)
	if got := Status(running) + " " + completions(running); got != "Running 0/1 of 3" {
		t.Errorf("running job: %s", got)
	}
}

func TestCountIndexes(t *testing.T) {
	for s, want := range map[string]string{"": "0", "0,2-4,6": "5", "1-1": `non-increasing order, previous: 1, current: 1`,
		"3,1": "non-increasing order, previous: 3, current: 1", "7": `too large index: "7"`, "a": `cannot convert string to integer for index: "a"`} {
		n, err := CountIndexes(s, 7)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = string(rune('0' + n))
		}
		if got != want {
			t.Errorf("CountIndexes(%q) = %s, want %s", s, got, want)
		}
	}
}
