package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// taintEffects are the effects of a device taint, sorted as upstream
// lists them when it rejects one.
var taintEffects = []resourceapi.DeviceTaintEffect{
	resourceapi.DeviceTaintEffectNoExecute,
	resourceapi.DeviceTaintEffectNoSchedule,
	resourceapi.DeviceTaintEffectNone,
}

// tolerationOperators are the operators upstream lists when it rejects one.
var tolerationOperators = []resourceapi.DeviceTolerationOperator{
	resourceapi.DeviceTolerationOpEqual,
	resourceapi.DeviceTolerationOpExists,
}

// deviceTaint checks a taint of a device or a taint rule. An effect that
// was stored already is not checked again, so that effects added later
// can be rolled back.
func deviceTaint(taint resourceapi.DeviceTaint, old *resourceapi.DeviceTaint, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelName(taint.Key, path.Child("key"))
	if taint.Value != "" {
		errs = append(errs, labelValue(taint.Value, path.Child("value"))...)
	}
	if old == nil || old.Effect != taint.Effect {
		errs = append(errs, oneOf(taint.Effect, taintEffects, path.Child("effect"))...)
	}
	return errs
}

// toleration checks a toleration of a request or an allocated device.
func toleration(t resourceapi.DeviceToleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key")).MarkCoveredByDeclarative()...)
	}
	switch t.Operator {
	case resourceapi.DeviceTolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourceapi.DeviceTolerationOpEqual:
		errs = append(errs, labelValue(t.Value, path.Child("value"))...)
	default:
		errs = append(errs, oneOf(t.Operator, tolerationOperators, path.Child("operator"))...)
	}
	if t.Effect != "" {
		errs = append(errs, oneOf(t.Effect, taintEffects, path.Child("effect"))...)
	}
	return errs
}

// taintRuleSpec checks a taint rule; old is the stored spec on update.
func taintRuleSpec(spec, old *resourceapi.DeviceTaintRuleSpec, path *field.Path) field.ErrorList {
	errs := taintSelector(spec.DeviceSelector, path.Child("deviceSelector"))
	var oldTaint *resourceapi.DeviceTaint
	if old != nil {
		oldTaint = &old.Taint
	}
	return append(errs, deviceTaint(spec.Taint, oldTaint, path.Child("taint"))...)
}

// taintSelector checks which devices a rule taints; every part is optional.
func taintSelector(s *resourceapi.DeviceTaintSelector, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Driver != nil {
		errs = append(errs, driverName(*s.Driver, path.Child("driver"))...)
	}
	if s.Pool != nil {
		errs = append(errs, poolName(*s.Pool, path.Child("pool"))...)
	}
	if s.Device != nil {
		errs = append(errs, label(*s.Device, path.Child("device"))...)
	}
	return errs
}

// taintRuleStatus checks the conditions a controller reports on a rule.
func taintRuleStatus(status *resourceapi.DeviceTaintRuleStatus, path *field.Path) field.ErrorList {
	path = path.Child("conditions")
	errs := metav1validation.ValidateConditions(status.Conditions, path)
	return append(errs, overLimit(len(status.Conditions), resourceapi.DeviceTaintRuleStatusMaxConditions, path)...)
}
