package deployment

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry/workload"
)

func ptr[T any](v T) *T { return &v }

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// valid is a defaulted deployment that passes validation.
func valid() *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyAlways,
					Containers:    []corev1.Container{{Name: "nginx", Image: "nginx:1"}, {Name: "sidecar", Image: "busybox"}},
				},
			},
		},
	}
	strategy{}.Default(d)
	return d
}

func TestDefault(t *testing.T) {
	quarter := intstr.FromString("25%")
	two := intstr.FromInt32(2)
	tests := []struct {
		name string
		in   appsv1.DeploymentSpec
		want appsv1.DeploymentSpec
	}{{
		name: "empty spec",
		want: appsv1.DeploymentSpec{
			Replicas: ptr[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &quarter}},
			RevisionHistoryLimit:    ptr[int32](10),
			ProgressDeadlineSeconds: ptr[int32](600),
		},
	}, {
		name: "explicit values kept",
		in: appsv1.DeploymentSpec{
			Replicas: ptr[int32](0),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &two}},
			RevisionHistoryLimit:    ptr[int32](0),
			ProgressDeadlineSeconds: ptr[int32](30),
		},
		want: appsv1.DeploymentSpec{
			Replicas: ptr[int32](0),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &two}},
			RevisionHistoryLimit:    ptr[int32](0),
			ProgressDeadlineSeconds: ptr[int32](30),
		},
	}, {
		name: "recreate gets no rolling update",
		in:   appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}},
		want: appsv1.DeploymentSpec{
			Replicas:                ptr[int32](1),
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr[int32](10),
			ProgressDeadlineSeconds: ptr[int32](600),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{Spec: tt.in}
			strategy{}.Default(d)
			if !reflect.DeepEqual(d.Spec, tt.want) {
				t.Errorf("defaulted spec\n got %+v\nwant %+v", d.Spec, tt.want)
			}
		})
	}
}

func TestDefaultCallsPodTemplateHook(t *testing.T) {
	defer func(old func(*corev1.PodTemplateSpec)) { workload.PodTemplateDefaults = old }(workload.PodTemplateDefaults)
	workload.PodTemplateDefaults = func(t *corev1.PodTemplateSpec) { t.Spec.RestartPolicy = corev1.RestartPolicyAlways }
	d := &appsv1.Deployment{}
	strategy{}.Default(d)
	if d.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("template restartPolicy = %q, want the hook's Always", d.Spec.Template.Spec.RestartPolicy)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*appsv1.Deployment)
		want   []string
	}{
		{name: "valid", change: func(*appsv1.Deployment) {}},
		{name: "no selector", change: func(d *appsv1.Deployment) { d.Spec.Selector = nil }, want: []string{
			"spec.selector: Required value",
			"spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
		}},
		{name: "empty selector", change: func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, want: []string{
			"spec.selector: Invalid value: {}: empty selector is invalid for deployment",
		}},
		{name: "labels do not match", change: func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "db"} }, want: []string{
			"spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`",
		}},
		{name: "bad selector label", change: func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Maybe"}}
		}, want: []string{
			"spec.selector.matchExpressions[0].operator: Invalid value: \"Maybe\": not a valid selector operator",
			"spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"Maybe\"}]}: invalid label selector",
		}},
		{name: "negative replicas", change: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr[int32](-1) }, want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
		}},
		{name: "surge and unavailable both zero", change: func(d *appsv1.Deployment) {
			zero := intstr.FromInt32(0)
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &zero}
		}, want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
		}},
		{name: "zero percent counts as zero", change: func(d *appsv1.Deployment) {
			zero, none := intstr.FromString("0%"), intstr.FromInt32(0)
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &none, MaxUnavailable: &zero}
		}, want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0",
		}},
		{name: "unavailable above 100%", change: func(d *appsv1.Deployment) {
			over := intstr.FromString("150%")
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &over
		}, want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
		}},
		{name: "bad percent", change: func(d *appsv1.Deployment) {
			bad := intstr.FromString("half")
			d.Spec.Strategy.RollingUpdate.MaxSurge = &bad
		}, want: []string{
			"spec.strategy.rollingUpdate.maxSurge: Invalid value: \"half\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
		}},
		{name: "negative surge", change: func(d *appsv1.Deployment) {
			neg := intstr.FromInt32(-1)
			d.Spec.Strategy.RollingUpdate.MaxSurge = &neg
		}, want: []string{
			"spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0",
		}},
		{name: "recreate with rolling update", change: func(d *appsv1.Deployment) {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
		}, want: []string{
			"spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
		}},
		{name: "unknown strategy", change: func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
		}, want: []string{
			"spec.strategy: Unsupported value: {\"type\":\"BlueGreen\"}: supported values: \"Recreate\", \"RollingUpdate\"",
		}},
		{name: "restart policy never", change: func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }, want: []string{
			"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
		}},
		{name: "active deadline", change: func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr[int64](5) }, want: []string{
			"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
		}},
		{name: "progress deadline not above min ready", change: func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 10
			d.Spec.ProgressDeadlineSeconds = ptr[int32](5)
		}, want: []string{
			"spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
		}},
		{name: "negative history", change: func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr[int32](-2) }, want: []string{
			"spec.revisionHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := valid()
			tt.change(d)
			if got := messages(strategy{}.Validate(d)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateCallsPodTemplateHook(t *testing.T) {
	defer func(old func(*corev1.PodTemplateSpec, *field.Path) field.ErrorList) {
		workload.ValidatePodTemplate = old
	}(workload.ValidatePodTemplate)
	workload.ValidatePodTemplate = func(tmpl *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
		return field.ErrorList{field.Required(p.Child("spec", "containers").Index(0).Child("image"), "")}
	}
	want := []string{"spec.template.spec.containers[0].image: Required value"}
	if got := messages(strategy{}.Validate(valid())); !reflect.DeepEqual(got, want) {
		t.Errorf("errors %q, want %q", got, want)
	}
}

func TestValidateUpdate(t *testing.T) {
	old := valid()
	tests := []struct {
		name   string
		change func(*appsv1.Deployment)
		want   []string
	}{
		{name: "scale and new image", change: func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr[int32](5)
			d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		}},
		{name: "selector changed", change: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}
			d.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
		}, want: []string{
			"spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"front\"}}: field is immutable",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := old.DeepCopy()
			tt.change(d)
			if got := messages(strategy{}.ValidateUpdate(d, old)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestPrepareForUpdateGeneration(t *testing.T) {
	old := valid()
	old.Generation = 4
	tests := []struct {
		name   string
		change func(*appsv1.Deployment)
		want   int64
	}{
		{name: "annotation only", change: func(d *appsv1.Deployment) { d.Annotations = map[string]string{"note": "x"} }, want: 5},
		{name: "label only", change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"team": "a"} }, want: 4},
		{name: "spec change is the server's bump", change: func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr[int32](9)
			d.Annotations = map[string]string{"note": "x"}
		}, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := old.DeepCopy()
			tt.change(d)
			strategy{}.PrepareForUpdate(d, old)
			if d.Generation != tt.want {
				t.Errorf("generation = %d, want %d", d.Generation, tt.want)
			}
		})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "deployments" || r.Singular != "deployment" || !reflect.DeepEqual(r.ShortNames, []string{"deploy"}) ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.Namespaced || !r.Status || !r.Generation || r.Scale == nil {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	if got := r.Kind.String(); got != "apps/v1, Kind=Deployment" {
		t.Errorf("kind %s", got)
	}
}

func TestScale(t *testing.T) {
	d := valid()
	d.Spec.Replicas = ptr[int32](3)
	d.Status.Replicas = 2
	scale := Resource().Scale
	spec, status, selector := scale.Get(d)
	if spec != 3 || status != 2 || selector != "app=web" {
		t.Errorf("Get = %d, %d, %q; want 3, 2, \"app=web\"", spec, status, selector)
	}
	scale.Set(d, 7)
	if *d.Spec.Replicas != 7 {
		t.Errorf("Set left spec.replicas at %d", *d.Spec.Replicas)
	}
}

func TestColumns(t *testing.T) {
	d := valid()
	d.Spec.Replicas = ptr[int32](3)
	d.Status = appsv1.DeploymentStatus{ReadyReplicas: 1, UpdatedReplicas: 2, AvailableReplicas: 1}
	d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}
	type col struct {
		name     string
		typ      string
		priority int32
		cell     interface{}
	}
	want := []col{
		{"Name", "string", 0, "web"},
		{"Ready", "string", 0, "1/3"},
		{"Up-to-date", "string", 0, int64(2)},
		{"Available", "string", 0, int64(1)},
		{"Age", "string", 0, "<unknown>"},
		{"Containers", "string", 1, "nginx,sidecar"},
		{"Images", "string", 1, "nginx:1,busybox"},
		{"Selector", "string", 1, "app=web,tier in (a,b)"},
	}
	var got []col
	for _, c := range Resource().Columns {
		got = append(got, col{c.Name, c.Type, c.Priority, c.Cell(d)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns\n got %v\nwant %v", got, want)
	}
}
