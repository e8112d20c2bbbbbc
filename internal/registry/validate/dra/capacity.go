package dra

import (
	"fmt"
	"math"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// capacityRequestPolicyMaxValidValues bounds the discrete amounts a
// request policy may list (upstream keeps it in its internal types only).
const capacityRequestPolicyMaxValidValues = 10

// requestPolicy checks how the capacity of a shareable device may be
// requested: either a list of amounts or a range, with a default in it.
// DRAFractionalCapacityRange is off in a 1.37 API server by default (it
// waits for --min-compatibility-version=1.37), so amounts are compared as
// whole units, rounded up, where upstream would otherwise use milli units.
func requestPolicy(capacity resource.Quantity, p *resourceapi.CapacityRequestPolicy, path *field.Path) field.ErrorList {
	defaultPath := path.Child("default")
	switch {
	case len(p.ValidValues) > 0 && p.ValidRange != nil:
		return field.ErrorList{field.Forbidden(path, `exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time`)}
	case len(p.ValidValues) > 0 && p.Default == nil:
		return field.ErrorList{field.Required(defaultPath, "required when validValues is defined")}
	case len(p.ValidValues) > 0:
		return validValues(*p.Default, capacity, p.ValidValues, path.Child("validValues"))
	case p.ValidRange != nil && p.Default == nil:
		return field.ErrorList{field.Required(defaultPath, "required when validRange is defined")}
	case p.ValidRange != nil:
		return validRange(*p.Default, capacity, p.ValidRange, path.Child("validRange"))
	}
	return nil
}

// validValues checks a sorted list of distinct amounts within the
// capacity that includes the default.
func validValues(def, capacity resource.Quantity, values []resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := 1; i < len(values); i++ {
		if values[i-1].Cmp(values[i]) > 0 {
			errs = append(errs, field.Invalid(path.Index(i), values[i].String(), "values must be sorted in ascending order"))
		}
	}
	hasDefault := false
	errs = append(errs, uniqueList(values, capacityRequestPolicyMaxValidValues, path,
		func(value resource.Quantity, path *field.Path) field.ErrorList {
			hasDefault = hasDefault || value.Cmp(def) == 0
			if value.Cmp(capacity) > 0 {
				return field.ErrorList{field.Invalid(path, value.String(), fmt.Sprintf("option is larger than capacity value: %s", capacity.String()))}
			}
			return nil
		},
		func(value resource.Quantity) string { return strconv.FormatInt(value.Value(), 10) })...)
	if !hasDefault {
		errs = append(errs, field.Invalid(path, def.String(), "default value is not valid according to the requestPolicy"))
	}
	return errs
}

// bound is an optional quantity, named as its field.
type bound struct {
	name  string
	value *resource.Quantity
}

// checkBounds checks each of the quantities that is set.
func checkBounds(bounds []bound, path *field.Path, check func(resource.Quantity, *field.Path) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	for _, b := range bounds {
		if b.value != nil {
			errs = append(errs, check(*b.value, path.Child(b.name))...)
		}
	}
	return errs
}

// validRange checks a range from a minimum to an optional maximum in
// optional steps, within the capacity and around the default.
func validRange(def, capacity resource.Quantity, r *resourceapi.CapacityRequestPolicyRange, path *field.Path) field.ErrorList {
	if r.Min == nil {
		return field.ErrorList{field.Required(path.Child("min"), "required when validRange is defined")}
	}
	errs := rangeOrder(def, capacity, r, path)
	if r.Step == nil {
		return errs
	}
	stepPath := path.Child("step")
	if r.Step.Sign() <= 0 {
		return append(errs, field.Invalid(stepPath, r.Step.String(), "must be greater than zero"))
	}
	first := r.Min.DeepCopy()
	first.Add(*r.Step)
	if first.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(stepPath, r.Step.String(), fmt.Sprintf("one step %s is larger than capacity value: %s", first.String(), capacity.String())))
	}
	bounds := []bound{{"default", &def}, {"min", r.Min}, {"max", r.Max}, {"step", r.Step}}
	if unsafe := checkBounds(bounds, path, int64Value); unsafe != nil {
		return append(errs, unsafe...)
	}
	errs = append(errs, onStep(def, *r.Min, *r.Step, stepPath)...)
	if r.Max != nil {
		errs = append(errs, onStep(*r.Max, *r.Min, *r.Step, stepPath)...)
	}
	return errs
}

// rangeOrder checks that min <= default <= max <= capacity, as far as
// they are set.
func rangeOrder(def, capacity resource.Quantity, r *resourceapi.CapacityRequestPolicyRange, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	minPath, maxPath, defaultPath := path.Child("min"), path.Child("max"), path.Child("default")
	if r.Min.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(minPath, r.Min.String(), fmt.Sprintf("min is larger than capacity value: %s", capacity.String())))
	}
	if def.Cmp(*r.Min) < 0 {
		errs = append(errs, field.Invalid(defaultPath, def.String(), fmt.Sprintf("default is less than min: %s", r.Min.String())))
	}
	if r.Max == nil {
		return errs
	}
	if r.Min.Cmp(*r.Max) > 0 {
		errs = append(errs, field.Invalid(maxPath, r.Min.String(), fmt.Sprintf("min is larger than max: %s", r.Max.String())))
	}
	if r.Max.Cmp(capacity) > 0 {
		errs = append(errs, field.Invalid(maxPath, r.Max.String(), fmt.Sprintf("max is larger than capacity value: %s", capacity.String())))
	}
	if def.Cmp(*r.Max) > 0 {
		errs = append(errs, field.Invalid(defaultPath, def.String(), fmt.Sprintf("default is more than max: %s", r.Max.String())))
	}
	return errs
}

// int64Value rejects a quantity whose whole units do not fit [0, MaxInt64]:
// beyond it Quantity.Value overflows, and below zero it may round to the
// wrong sign, either of which breaks the step arithmetic.
func int64Value(q resource.Quantity, path *field.Path) field.ErrorList {
	switch {
	case q.Sign() < 0:
		return field.ErrorList{field.Invalid(path, q.String(), apivalidation.IsNegativeErrorMsg)}
	case q.CmpInt64(math.MaxInt64) > 0:
		return field.ErrorList{field.Invalid(path, q.String(), fmt.Sprintf("must not be larger than %d", int64(math.MaxInt64)))}
	}
	return nil
}

// onStep checks that value is a whole number of steps above from.
func onStep(value, from, step resource.Quantity, path *field.Path) field.ErrorList {
	if (value.Value()-from.Value())%step.Value() != 0 {
		return field.ErrorList{field.Invalid(path, value.String(), fmt.Sprintf("value is not a multiple of a given step (%s) from (%s)", step.String(), from.String()))}
	}
	return nil
}
