package workload

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestIntOrPercent(t *testing.T) {
	tests := []struct {
		in        intstr.IntOrString
		value     int
		errs      []string
		above100  bool
		fieldPath string
	}{
		{in: intstr.FromInt32(3), value: 3},
		{in: intstr.FromString("25%"), value: 25},
		{in: intstr.FromString("150%"), value: 150, above100: true},
		{in: intstr.FromInt32(-1), value: -1, errs: []string{"x: Invalid value: -1: must be greater than or equal to 0"}},
		{in: intstr.FromString("5"), value: 5, errs: []string{
			"x: Invalid value: \"5\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"}},
		{in: intstr.IntOrString{Type: 7}, errs: []string{"x: Invalid value: intstr.IntOrString{Type:7, IntVal:0, StrVal:\"\"}: must be an integer or percentage (e.g '5%%')"}},
	}
	for _, tt := range tests {
		if got := registrytest.Messages(ValidateIntOrPercent(tt.in, field.NewPath("x"))); !reflect.DeepEqual(got, tt.errs) {
			t.Errorf("ValidateIntOrPercent(%v) = %q, want %q", tt.in, got, tt.errs)
		}
		if v := IntOrPercentValue(tt.in); v != tt.value {
			t.Errorf("IntOrPercentValue(%v) = %d, want %d", tt.in, v, tt.value)
		}
		if over := len(NotMoreThan100Percent(tt.in, field.NewPath("x"))) > 0; over != tt.above100 {
			t.Errorf("NotMoreThan100Percent(%v) flagged %v, want %v", tt.in, over, tt.above100)
		}
	}
}

func TestScaleAccess(t *testing.T) {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "web"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}},
	}}, Status: appsv1.ReplicaSetStatus{Replicas: 4}}
	s := ScaleAccess()
	if spec, status, sel := s.Get(rs); spec != 0 || status != 4 || sel != "app=web,tier notin (db)" {
		t.Errorf("Get = %d, %d, %q", spec, status, sel)
	}
	s.Set(rs, 2)
	if rs.Spec.Replicas == nil || *rs.Spec.Replicas != 2 {
		t.Errorf("Set left replicas %v", rs.Spec.Replicas)
	}
}

func TestSelectorString(t *testing.T) {
	for _, tt := range []struct {
		in   *metav1.LabelSelector
		want string
	}{
		{nil, ""},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"b": "2", "a": "1"}}, "a=1,b=2"},
		{&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}, "<invalid>"},
	} {
		if got := SelectorString(tt.in); got != tt.want {
			t.Errorf("SelectorString(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHooksAreOptional(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{}
	DefaultTemplate(tmpl)
	if !reflect.DeepEqual(tmpl, &corev1.PodTemplateSpec{}) {
		t.Errorf("nil hook changed the template: %+v", tmpl)
	}
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	tmpl.Labels = map[string]string{"a": "b"}
	if errs := ValidateSelectorAndTemplate(sel, tmpl, DeploymentRules, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("errors without a pod-template hook: %v", errs)
	}
}

func TestPartsOfOtherKinds(t *testing.T) {
	if r := Replicas(&appsv1.DaemonSet{}); r != 0 {
		t.Errorf("a DaemonSet has %d replicas, want none", r)
	}
	defer func() {
		if recover() == nil {
			t.Error("a ControllerRevision was taken for a workload")
		}
	}()
	Replicas(&appsv1.ControllerRevision{})
}

func TestValidateTemplateRequired(t *testing.T) {
	registrytest.ExpectErrors(t, ValidateTemplate(labels.Everything(), nil, "ReplicationController", field.NewPath("spec", "template")),
		"spec.template: Required value")
}
