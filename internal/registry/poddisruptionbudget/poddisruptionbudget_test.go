package poddisruptionbudget

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *policyv1.PodDisruptionBudget {
	two := intstr.FromInt32(2)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
}

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[*policyv1.PodDisruptionBudget]{
		{Name: "valid", Change: func(*policyv1.PodDisruptionBudget) {}},
		{Name: "both", Change: func(p *policyv1.PodDisruptionBudget) {
			one := intstr.FromInt32(1)
			p.Spec.MaxUnavailable = &one
		}, Want: []string{`spec: Invalid value: {"minAvailable":2,"selector":{"matchLabels":{"app":"web"}},"maxUnavailable":1}: minAvailable and maxUnavailable cannot be both set`}},
		{Name: "negative", Change: func(p *policyv1.PodDisruptionBudget) {
			n := intstr.FromInt32(-1)
			p.Spec.MinAvailable = &n
		}, Want: []string{"spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"}},
		{Name: "over 100%", Change: func(p *policyv1.PodDisruptionBudget) {
			n := intstr.FromString("150%")
			p.Spec.MinAvailable = &n
		}, Want: []string{`spec.minAvailable: Invalid value: "150%": must not be greater than 100%`}},
		{Name: "policy", Change: func(p *policyv1.PodDisruptionBudget) {
			bad := policyv1.UnhealthyPodEvictionPolicyType("Never")
			p.Spec.UnhealthyPodEvictionPolicy = &bad
		}, Want: []string{`spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", "IfHealthyBudget"`}},
	})
}

func TestColumns(t *testing.T) {
	p := valid()
	p.Status.DisruptionsAllowed = 1
	columns := Resource().Columns
	want := []interface{}{"web", "2", "N/A", int64(1)}
	for i, w := range want {
		if got := columns[i].Cell(p); got != w {
			t.Errorf("column %s: %v, want %v", columns[i].Name, got, w)
		}
	}
}
