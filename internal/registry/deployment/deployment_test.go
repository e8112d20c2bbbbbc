package deployment

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// valid is a defaulted deployment that passes validation.
func valid() *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: registrytest.PodTemplate(map[string]string{"app": "web"},
				corev1.Container{Name: "nginx", Image: "nginx:1"}, corev1.Container{Name: "sidecar", Image: "busybox"}),
		},
	}
	strategy{}.Default(d)
	return d
}

func TestDefault(t *testing.T) {
	quarter := intstr.FromString("25%")
	two := intstr.FromInt32(2)
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*appsv1.Deployment]{{
		Name: "empty spec",
		In:   &appsv1.Deployment{},
		Want: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &quarter}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		}},
	}, {
		Name: "explicit values kept",
		In: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &two}},
			RevisionHistoryLimit:    ptr.To[int32](0),
			ProgressDeadlineSeconds: ptr.To[int32](30),
		}},
		Want: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &two}},
			RevisionHistoryLimit:    ptr.To[int32](0),
			ProgressDeadlineSeconds: ptr.To[int32](30),
		}},
	}, {
		Name: "recreate gets no rolling update",
		In:   &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}}},
		Want: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To[int32](1),
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
		}},
	}})
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
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*appsv1.Deployment]{
		{Name: "valid", Change: func(*appsv1.Deployment) {}},
		{Name: "no selector", Change: func(d *appsv1.Deployment) { d.Spec.Selector = nil }, Want: []string{
			"spec.selector: Required value",
			"spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
		}},
		{Name: "empty selector", Change: func(d *appsv1.Deployment) { d.Spec.Selector = &metav1.LabelSelector{} }, Want: []string{
			"spec.selector: Invalid value: {}: empty selector is invalid for deployment",
		}},
		{Name: "labels do not match", Change: func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "db"} }, Want: []string{
			"spec.template.metadata.labels: Invalid value: {\"app\":\"db\"}: `selector` does not match template `labels`",
		}},
		{Name: "bad selector label", Change: func(d *appsv1.Deployment) {
			d.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Maybe"}}
		}, Want: []string{
			"spec.selector.matchExpressions[0].operator: Invalid value: \"Maybe\": not a valid selector operator",
			"spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"Maybe\"}]}: invalid label selector",
		}},
		{Name: "negative replicas", Change: func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](-1) }, Want: []string{
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
		}},
		{Name: "surge and unavailable both zero", Change: func(d *appsv1.Deployment) {
			zero := intstr.FromInt32(0)
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &zero}
		}, Want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
		}},
		{Name: "zero percent counts as zero", Change: func(d *appsv1.Deployment) {
			zero, none := intstr.FromString("0%"), intstr.FromInt32(0)
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &none, MaxUnavailable: &zero}
		}, Want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0",
		}},
		{Name: "unavailable above 100%", Change: func(d *appsv1.Deployment) {
			over := intstr.FromString("150%")
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &over
		}, Want: []string{
			"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%",
		}},
		{Name: "bad percent", Change: func(d *appsv1.Deployment) {
			bad := intstr.FromString("half")
			d.Spec.Strategy.RollingUpdate.MaxSurge = &bad
		}, Want: []string{
			"spec.strategy.rollingUpdate.maxSurge: Invalid value: \"half\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
		}},
		{Name: "negative surge", Change: func(d *appsv1.Deployment) {
			neg := intstr.FromInt32(-1)
			d.Spec.Strategy.RollingUpdate.MaxSurge = &neg
		}, Want: []string{
			"spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0",
		}},
		{Name: "recreate with rolling update", Change: func(d *appsv1.Deployment) {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
		}, Want: []string{
			"spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
		}},
		{Name: "unknown strategy", Change: func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: "BlueGreen"}
		}, Want: []string{
			"spec.strategy: Unsupported value: {\"type\":\"BlueGreen\"}: supported values: \"Recreate\", \"RollingUpdate\"",
		}},
		{Name: "restart policy never", Change: func(d *appsv1.Deployment) { d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever }, Want: []string{
			"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
		}},
		{Name: "active deadline", Change: func(d *appsv1.Deployment) { d.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) }, Want: []string{
			"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
		}},
		{Name: "progress deadline not above min ready", Change: func(d *appsv1.Deployment) {
			d.Spec.MinReadySeconds = 10
			d.Spec.ProgressDeadlineSeconds = ptr.To[int32](5)
		}, Want: []string{
			"spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
		}},
		{Name: "negative history", Change: func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](-2) }, Want: []string{
			"spec.revisionHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
		}},
	})
}

func TestValidateCallsPodTemplateHook(t *testing.T) {
	defer func(old func(*corev1.PodTemplateSpec, *field.Path) field.ErrorList) {
		workload.ValidatePodTemplate = old
	}(workload.ValidatePodTemplate)
	workload.ValidatePodTemplate = func(tmpl *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
		return field.ErrorList{field.Required(p.Child("spec", "containers").Index(0).Child("image"), "")}
	}
	registrytest.ExpectErrors(t, strategy{}.Validate(valid()), "spec.template.spec.containers[0].image: Required value")
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*appsv1.Deployment]{
		{Name: "scale and new image", Change: func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](5)
			d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		}},
		{Name: "selector changed", Change: func(d *appsv1.Deployment) {
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}
			d.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
		}, Want: []string{
			"spec.selector: Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"front\"}}: field is immutable",
		}},
	})
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
			d.Spec.Replicas = ptr.To[int32](9)
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
	d.Spec.Replicas = ptr.To[int32](3)
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
	d.Spec.Replicas = ptr.To[int32](3)
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

// A status write keeps the stored labels and takes the annotations.
func TestStatusUpdateKeepsLabels(t *testing.T) {
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}
	cur := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"},
		Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"}}}
	strategy{}.PrepareForStatusUpdate(cur, old)
	if cur.Labels["app"] != "web" || cur.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Errorf("after a status write: labels %v annotations %v", cur.Labels, cur.Annotations)
	}
}
