package replicationcontroller

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func template() *corev1.PodTemplateSpec {
	t := registrytest.PodTemplate(map[string]string{"app": "web"}, corev1.Container{Name: "nginx", Image: "nginx:1"})
	return &t
}

func valid() *corev1.ReplicationController {
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ReplicationControllerSpec{Template: template()},
	}
	strategy{}.Default(rc)
	return rc
}

func TestDefault(t *testing.T) {
	web := map[string]string{"app": "web"}
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[*corev1.ReplicationController]{
		{Name: "selector, labels and replicas from the template",
			In: &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: template()}},
			Want: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: web},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: web, Template: template()}}},
		{Name: "own selector, labels and replicas kept",
			In: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](0), Selector: map[string]string{"app": "x"}, Template: template()}},
			Want: &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](0), Selector: map[string]string{"app": "x"}, Template: template()}}},
		{Name: "no template",
			In:   &corev1.ReplicationController{},
			Want: &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1)}}},
		{Name: "template without labels",
			In: &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: &corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}}},
			Want: &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1),
				Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}}}},
	})
}

func TestDefaultCopiesLabels(t *testing.T) {
	rc := valid()
	rc.Labels["extra"] = "x"
	if len(rc.Spec.Selector) != 1 || len(rc.Spec.Template.Labels) != 1 {
		t.Errorf("labels share the template's map: selector %v, template %v", rc.Spec.Selector, rc.Spec.Template.Labels)
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*corev1.ReplicationController]{
		{Name: "valid", Change: func(*corev1.ReplicationController) {}},
		// The messages below are upstream's (ValidateReplicationControllerSpec).
		{Name: "negative replicas and min ready", Change: func(rc *corev1.ReplicationController) {
			rc.Spec.Replicas = ptr.To[int32](-1)
			rc.Spec.MinReadySeconds = -3
		}, Want: []string{
			"spec.minReadySeconds: Invalid value: -3: must be greater than or equal to 0",
			"spec.replicas: Invalid value: -1: must be greater than or equal to 0",
		}},
		{Name: "selector does not match", Change: func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{"app": "db"} }, Want: []string{
			"spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`",
		}},
		{Name: "empty selector", Change: func(rc *corev1.ReplicationController) { rc.Spec.Selector = map[string]string{} }, Want: []string{
			"spec.selector: Required value",
		}},
		{Name: "no template", Change: func(rc *corev1.ReplicationController) { rc.Spec.Template = nil }, Want: []string{
			"spec.template: Required value",
		}},
		{Name: "no replicas", Change: func(rc *corev1.ReplicationController) { rc.Spec.Replicas = nil }, Want: []string{
			"spec.replicas: Required value",
		}},
		{Name: "restart never and a deadline", Change: func(rc *corev1.ReplicationController) {
			rc.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
			rc.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
		}, Want: []string{
			"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
			"spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicationController is not Supported",
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[*corev1.ReplicationController]{
		// Unlike apps/v1, a replication controller's selector may change.
		{Name: "selector changes", Change: func(rc *corev1.ReplicationController) {
			rc.Spec.Selector = map[string]string{"app": "web", "tier": "front"}
			rc.Spec.Template.Labels = map[string]string{"app": "web", "tier": "front"}
		}},
		{Name: "scale to zero", Change: func(rc *corev1.ReplicationController) { rc.Spec.Replicas = ptr.To[int32](0) }},
		{Name: "status", Change: func(rc *corev1.ReplicationController) {
			rc.Status = corev1.ReplicationControllerStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 1}
		}},
		// The messages below are upstream's (ValidateReplicationControllerStatus).
		{Name: "negative status", Change: func(rc *corev1.ReplicationController) {
			rc.Status = corev1.ReplicationControllerStatus{Replicas: -1, ObservedGeneration: -2}
		}, Want: []string{
			"status.replicas: Invalid value: -1: must be greater than or equal to 0",
			"status.observedGeneration: Invalid value: -2: must be greater than or equal to 0",
			"status.fullyLabeledReplicas: Invalid value: 0: cannot be greater than status.replicas",
			"status.readyReplicas: Invalid value: 0: cannot be greater than status.replicas",
			"status.availableReplicas: Invalid value: 0: cannot be greater than status.replicas",
		}},
		{Name: "more available than ready", Change: func(rc *corev1.ReplicationController) {
			rc.Status = corev1.ReplicationControllerStatus{Replicas: 3, FullyLabeledReplicas: 4, ReadyReplicas: 1, AvailableReplicas: 2}
		}, Want: []string{
			"status.fullyLabeledReplicas: Invalid value: 4: cannot be greater than status.replicas",
			"status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas",
		}},
	})
}

func TestResourceAndScale(t *testing.T) {
	r := Resource()
	if r.Resource != "replicationcontrollers" || r.Singular != "replicationcontroller" || !reflect.DeepEqual(r.ShortNames, []string{"rc"}) ||
		!reflect.DeepEqual(r.Categories, []string{"all"}) || !r.Namespaced || !r.Status || !r.Generation ||
		r.Kind != corev1.SchemeGroupVersion.WithKind("ReplicationController") || !registry.Scheme.Recognizes(r.Kind) {
		t.Errorf("unexpected discovery data: %+v", r)
	}
	rc := valid()
	rc.Spec.Selector = map[string]string{"tier": "front", "app": "web"}
	rc.Spec.Template.Labels = rc.Spec.Selector
	rc.Status.Replicas = 2
	if spec, status, sel := r.Scale.Get(rc); spec != 1 || status != 2 || sel != "app=web,tier=front" {
		t.Errorf("scale Get = %d, %d, %q", spec, status, sel)
	}
	r.Scale.Set(rc, 5)
	if *rc.Spec.Replicas != 5 {
		t.Errorf("scale Set left replicas %d", *rc.Spec.Replicas)
	}
	if got := r.Fields(rc); !reflect.DeepEqual(got, fields.Set{"status.replicas": "2"}) {
		t.Errorf("fields %v", got)
	}
}

func TestColumns(t *testing.T) {
	rc := valid()
	rc.Spec.Replicas = ptr.To[int32](3)
	rc.Status = corev1.ReplicationControllerStatus{Replicas: 3, ReadyReplicas: 2}
	registrytest.ExpectRow(t, Resource().Columns, rc,
		[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"},
		[]interface{}{"web", int64(3), int64(3), int64(2), "<unknown>", "nginx", "nginx:1", "app=web"})
	rc.Spec.Selector = nil
	rc.Spec.Template = nil
	registrytest.ExpectRow(t, Resource().Columns, rc,
		[]string{"Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"},
		[]interface{}{"web", int64(3), int64(3), int64(2), "<unknown>", "", "", "<none>"})
}

func TestPrepareForDeleteOrphansByDefault(t *testing.T) {
	background := metav1.DeletePropagationBackground
	now := metav1.Now()
	for _, tt := range []struct {
		name       string
		opts       *metav1.DeleteOptions
		finalizers []string
		deleting   bool
		want       []string
	}{
		{name: "no policy", opts: &metav1.DeleteOptions{}, want: []string{metav1.FinalizerOrphanDependents}},
		{name: "no options", want: []string{metav1.FinalizerOrphanDependents}},
		{name: "other finalizer kept", opts: &metav1.DeleteOptions{}, finalizers: []string{"example.com/x"},
			want: []string{"example.com/x", metav1.FinalizerOrphanDependents}},
		{name: "background", opts: &metav1.DeleteOptions{PropagationPolicy: &background}},
		{name: "orphanDependents false", opts: &metav1.DeleteOptions{OrphanDependents: ptr.To(false)}},
		{name: "foreground finalizer set", opts: &metav1.DeleteOptions{}, finalizers: []string{metav1.FinalizerDeleteDependents},
			want: []string{metav1.FinalizerDeleteDependents}},
		{name: "already deleting", opts: &metav1.DeleteOptions{}, deleting: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := valid()
			rc.Finalizers = tt.finalizers
			if tt.deleting {
				rc.DeletionTimestamp = &now
			}
			pending, err := strategy{}.PrepareForDelete(rc, tt.opts)
			if err != nil || pending {
				t.Fatalf("PrepareForDelete = %v, %v", pending, err)
			}
			if !reflect.DeepEqual(rc.Finalizers, tt.want) {
				t.Errorf("finalizers %q, want %q", rc.Finalizers, tt.want)
			}
		})
	}
}
