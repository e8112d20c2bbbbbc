package devicetaintrule

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type rule = *resourceapi.DeviceTaintRule

// now is the strategy's clock in these tests, with a fraction of a second
// that timeAdded must not keep.
var now = time.Date(2026, 5, 1, 10, 0, 0, 500, time.UTC)

var s = strategy{now: func() time.Time { return now }}

// conformance is the rule upstream's conformance test creates: no
// selector (no device), a taint without effect on scheduling.
func conformance() rule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule-e2e"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			Taint: resourceapi.DeviceTaint{Key: "testing", Effect: resourceapi.DeviceTaintEffectNone},
		},
	}
}

func at(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

func TestDefault(t *testing.T) {
	earlier := at(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	withTime := conformance()
	withTime.Spec.Taint.TimeAdded = earlier
	want := conformance()
	want.Spec.Taint.TimeAdded = at(now.Truncate(time.Second))
	registrytest.RunDefault(t, s, []registrytest.DefaultCase[rule]{
		{Name: "timeAdded is now, to the second", In: conformance(), Want: want},
		{Name: "timeAdded given", In: withTime, Want: withTime.DeepCopy()},
	})
}

// TestStatus: a create starts without status, an update keeps the stored
// one, a status write keeps the spec and the metadata.
func TestStatus(t *testing.T) {
	cond := metav1.Condition{Type: "Testing", Status: metav1.ConditionTrue, Reason: "E2E_test_running",
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	r := conformance()
	r.Status.Conditions = []metav1.Condition{cond}
	if got := registrytest.Created(s, r); got.Status.Conditions != nil || !got.Spec.Taint.TimeAdded.Equal(at(now.Truncate(time.Second))) {
		t.Errorf("created %+v", got)
	}

	old := registrytest.Created(s, conformance())
	old.Status.Conditions = []metav1.Condition{cond}
	next := old.DeepCopy()
	next.Status.Conditions = nil
	next.Labels = map[string]string{"a": "b"}
	s.PrepareForUpdate(next, old)
	if len(next.Status.Conditions) != 1 || next.Labels["a"] != "b" {
		t.Errorf("update kept %+v", next)
	}

	next = old.DeepCopy()
	next.Spec.Taint.Key = "other"
	next.Labels = map[string]string{"a": "b"}
	next.Status.Conditions = nil
	var su registry.StatusUpdater = s
	su.PrepareForStatusUpdate(next, old)
	if next.Spec.Taint.Key != "testing" || next.Labels != nil || next.Status.Conditions != nil {
		t.Errorf("status write kept %+v", next)
	}
}

// TestTimeAdded: an update that changes the effect moves timeAdded to now
// unless it sets timeAdded itself.
func TestTimeAdded(t *testing.T) {
	created := at(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	mine := at(time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		name   string
		change func(rule)
		want   *metav1.Time
	}{
		{"new effect", func(r rule) { r.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNoExecute }, at(now.Truncate(time.Second))},
		{"new effect and time", func(r rule) {
			r.Spec.Taint.Effect, r.Spec.Taint.TimeAdded = resourceapi.DeviceTaintEffectNoExecute, mine
		}, mine},
		{"new value", func(r rule) { r.Spec.Taint.Value = "v" }, created},
		{"new time", func(r rule) { r.Spec.Taint.TimeAdded = mine }, mine},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := conformance()
			old.Spec.Taint.TimeAdded = created
			next := old.DeepCopy()
			tt.change(next)
			s.PrepareForUpdate(next, old)
			if !next.Spec.Taint.TimeAdded.Equal(tt.want) {
				t.Errorf("timeAdded %v, want %v", next.Spec.Taint.TimeAdded, tt.want)
			}
		})
	}
}

// TestConformance: what upstream's conformance test writes is accepted.
func TestConformance(t *testing.T) {
	r := registrytest.Created(s, conformance())
	registrytest.ExpectErrors(t, s.Validate(r))
	next := r.DeepCopy()
	next.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNoExecute
	s.Default(next)
	s.PrepareForUpdate(next, r)
	registrytest.ExpectErrors(t, s.ValidateUpdate(next, r))
	status := next.DeepCopy()
	status.Status.Conditions = []metav1.Condition{{Type: "Testing", Status: metav1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)), Reason: "E2E_test_running", Message: "This condition can be ignored."}}
	s.PrepareForStatusUpdate(status, next)
	registrytest.ExpectErrors(t, s.ValidateUpdate(status, next))
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "devicetaintrules" || r.Singular != "devicetaintrule" || r.ShortNames != nil || r.Categories != nil ||
		r.Namespaced || !r.Status || !r.Generation || r.KeepStatusOnCreate || r.ReturnDeletedObject || r.Fields != nil ||
		r.Kind != resourceapi.SchemeGroupVersion.WithKind("DeviceTaintRule") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}

func TestColumns(t *testing.T) {
	r := conformance()
	r.Spec.Taint.Value = "v"
	cols := Resource().Columns
	registrytest.ExpectRow(t, cols, r, []string{"Name", "Key", "Value", "Effect", "TimeAdded", "Age"},
		[]interface{}{"rule-e2e", "testing", "v", "None", "", "<unknown>"})
	r.Spec.Taint.TimeAdded = at(time.Now().Add(-90 * time.Minute))
	if got := registrytest.TextRow(t, cols, r); got != "rule-e2e|testing|v|None|90m" {
		t.Errorf("row %q", got)
	}
	if d, want := cols[4].Description, (resourceapi.DeviceTaint{}).SwaggerDoc()["timeAdded"]; d != want || d == "" {
		t.Errorf("TIMEADDED description %q", d)
	}
}
