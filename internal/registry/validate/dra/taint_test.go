package dra

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func taintRule() *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: goodName},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(testDriver), Pool: ptr.To(goodName), Device: ptr.To(goodName)},
			Taint:          resourceapi.DeviceTaint{Key: "example.com/taint", Value: "tainted", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	}
}

func TestDeviceTaintRule(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*resourceapi.DeviceTaintRuleSpec)
		want   []want
	}{
		"valid": {change: func(*resourceapi.DeviceTaintRuleSpec) {}},
		"no selector": {change: func(s *resourceapi.DeviceTaintRuleSpec) {
			s.DeviceSelector, s.Taint = nil, resourceapi.DeviceTaint{Key: goodName, Effect: resourceapi.DeviceTaintEffectNone}
		}},
		"bad selector": {
			change: func(s *resourceapi.DeviceTaintRuleSpec) {
				s.DeviceSelector = &resourceapi.DeviceTaintSelector{Driver: ptr.To(badName), Pool: ptr.To(""), Device: ptr.To(badName)}
			},
			want: []want{
				invalid("spec.deviceSelector.driver", "RFC 1123 subdomain"),
				required("spec.deviceSelector.pool"),
				invalid("spec.deviceSelector.device", "RFC 1123 label"),
			},
		},
		"missing effect": {
			change: func(s *resourceapi.DeviceTaintRuleSpec) { s.Taint.Effect = "" },
			want:   []want{required("spec.taint.effect")},
		},
		"bad taint": {
			change: func(s *resourceapi.DeviceTaintRuleSpec) {
				s.Taint = resourceapi.DeviceTaint{Key: badName, Value: badName, Effect: "some-other-effect"}
			},
			want: []want{
				invalid("spec.taint.key", "name part must consist of alphanumeric characters"),
				invalid("spec.taint.value", "a valid label must be an empty string"),
				notSupported("spec.taint.effect", `"NoExecute", "NoSchedule", "None"`),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rule := taintRule()
			tc.change(&rule.Spec)
			assertErrors(t, DeviceTaintRule(rule), tc.want)
		})
	}
}

func TestDeviceTaintRuleUpdate(t *testing.T) {
	unknownEffect := taintRule()
	unknownEffect.Spec.Taint.Effect = "some-other-effect"
	for name, tc := range map[string]struct {
		old    *resourceapi.DeviceTaintRule
		change func(*resourceapi.DeviceTaintRule)
		want   []want
	}{
		"no change": {old: taintRule(), change: func(*resourceapi.DeviceTaintRule) {}},
		"stored unknown effect": {
			old:    unknownEffect,
			change: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Value = "other" },
		},
		"new unknown effect": {
			old:    taintRule(),
			change: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Effect = "some-other-effect" },
			want:   []want{notSupported("spec.taint.effect")},
		},
		"bad new key": {
			old:    unknownEffect,
			change: func(r *resourceapi.DeviceTaintRule) { r.Spec.Taint.Key = "" },
			want: []want{
				invalid("spec.taint.key", "name part must be non-empty"),
				invalid("spec.taint.key", "name part must consist of alphanumeric characters"),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rule := tc.old.DeepCopy()
			tc.change(rule)
			assertErrors(t, DeviceTaintRuleUpdate(rule, tc.old), tc.want)
		})
	}
}

func TestDeviceTaintRuleStatusUpdate(t *testing.T) {
	condition := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}
	}
	for name, tc := range map[string]struct {
		conditions []metav1.Condition
		want       []want
	}{
		"none":  {},
		"valid": {conditions: []metav1.Condition{condition("EvictionInProgress")}},
		"bad conditions": {
			conditions: []metav1.Condition{condition("a"), condition("a"), {Type: badName, Status: "maybe", LastTransitionTime: metav1.Now()}},
			want: []want{
				duplicate("status.conditions[1]"),
				invalid("status.conditions[2].type", "name part must consist of alphanumeric characters"),
				notSupported("status.conditions[2].status"),
				required("status.conditions[2].reason"),
			},
		},
		"too many conditions": {
			conditions: func() []metav1.Condition {
				var list []metav1.Condition
				for i := range resourceapi.DeviceTaintRuleStatusMaxConditions + 1 {
					list = append(list, condition(fmt.Sprintf("c%d", i)))
				}
				return list
			}(),
			want: []want{tooMany("status.conditions")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			old := taintRule()
			rule := old.DeepCopy()
			rule.Status.Conditions = tc.conditions
			assertErrors(t, DeviceTaintRuleStatusUpdate(rule, old), tc.want)
		})
	}
}
