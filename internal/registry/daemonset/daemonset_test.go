package daemonset

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: registrytest.PodTemplate(map[string]string{"app": "agent"}, corev1.Container{Name: "agent", Image: "busybox"}),
		},
	}
	strategy{}.Default(ds)
	return ds
}

func TestDefault(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*appsv1.DaemonSet]{{
		Name: "empty spec",
		In:   &appsv1.DaemonSet{},
		Want: &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}},
			RevisionHistoryLimit: ptr.To[int32](10),
		}},
	}, {
		Name: "OnDelete has no rolling update",
		In:   &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}},
		Want: &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{
			UpdateStrategy:       appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			RevisionHistoryLimit: ptr.To[int32](10),
		}},
	}})
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.DaemonSet]{
		{Name: "valid", Change: func(*appsv1.DaemonSet) {}},
		{Name: "selector does not match", Change: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"app": "other"} },
			Want: []string{"spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"}},
		{Name: "surge and unavailable", Change: func(ds *appsv1.DaemonSet) {
			two := intstr.FromInt32(2)
			ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = &two
		}, Want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 2: may not be set when maxUnavailable is non-zero"}},
		{Name: "neither", Change: func(ds *appsv1.DaemonSet) {
			zero := intstr.FromInt32(0)
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &zero
		}, Want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"}},
		{Name: "over 100%", Change: func(ds *appsv1.DaemonSet) {
			p := intstr.FromString("120%")
			ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &p
		}, Want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"}},
		{Name: "unknown strategy", Change: func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: "Sometimes"} },
			Want: []string{`spec.updateStrategy: Unsupported value: {"type":"Sometimes"}: supported values: "RollingUpdate", "OnDelete"`}},
		{Name: "restart policy", Change: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			Want: []string{`spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"`}},
	})
}

func TestTemplateGeneration(t *testing.T) {
	ds := registrytest.Created[*appsv1.DaemonSet](strategy{}, valid())
	if g := TemplateGeneration(ds); g != 1 {
		t.Fatalf("created with template generation %d, want 1", g)
	}
	same := ds.DeepCopy()
	same.Annotations[TemplateGenerationAnnotation] = "7" // a writer may not set it
	strategy{}.PrepareForUpdate(same, ds)
	if g := TemplateGeneration(same); g != 1 {
		t.Errorf("update without a template change: generation %d, want 1", g)
	}
	changed := ds.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "busybox:2"
	strategy{}.PrepareForUpdate(changed, ds)
	if g := TemplateGeneration(changed); g != 2 {
		t.Errorf("update of the template: generation %d, want 2", g)
	}
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(func() *appsv1.DaemonSet {
		c := ds.DeepCopy()
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent", "x": "y"}}
		c.Spec.Template.Labels["x"] = "y"
		return c
	}(), ds), `spec.selector: Invalid value: {"matchLabels":{"app":"agent","x":"y"}}: field is immutable`)
}

func TestColumns(t *testing.T) {
	ds := valid()
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	columns := Resource().Columns
	names := registrytest.Names(columns)
	want := []string{"Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"}
	if len(names) != len(want) {
		t.Fatalf("columns %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("columns %v, want %v", names, want)
		}
	}
	cells := []interface{}{"agent", int64(3), int64(3), int64(2), int64(1), int64(2), "disk=ssd"}
	for i, c := range cells {
		if got := columns[i].Cell(ds); got != c {
			t.Errorf("column %s: %v, want %v", names[i], got, c)
		}
	}
	if got := columns[10].Cell(ds); got != "app=agent" {
		t.Errorf("selector column %v", got)
	}
}
