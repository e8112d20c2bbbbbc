package dra

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// celFeatures are the DRA feature gates the CEL environment depends on, at
// their Kubernetes 1.37 defaults: DRAConsumableCapacity is on,
// DRAListTypeAttributes is off.
var celFeatures = dracel.Features{
	EnableConsumableCapacity: true,
	EnableListTypeAttributes: false,
}

// derivedAttributeMaxCost is the cost one derived attribute expression may
// have on its own; all of a claim's together must stay within
// DeviceClaimDerivedAttributeCELMaxCost.
const derivedAttributeMaxCost = min(resourceapi.CELSelectorExpressionMaxCost, resourceapi.DeviceClaimDerivedAttributeCELMaxCost)

// selectorExpression checks a new CEL device selector.
func selectorExpression(expression string, path *field.Path) field.ErrorList {
	cost, errs := compileExpression(expression, false, path)
	if errs == nil && cost > resourceapi.CELSelectorExpressionMaxCost {
		errs = field.ErrorList{tooComplex(path)}
	}
	return errs
}

// derivedAttributeExpression checks the CEL expression of a new derived
// attribute and adds its cost to the claim's total.
func derivedAttributeExpression(expression string, total *uint64, path *field.Path) field.ErrorList {
	cost, errs := compileExpression(expression, true, path)
	if errs != nil {
		return errs
	}
	*total += cost
	if cost > derivedAttributeMaxCost {
		return field.ErrorList{tooComplex(path)}
	}
	return nil
}

func tooComplex(path *field.Path) *field.Error {
	return field.Forbidden(path, "too complex, exceeds cost limit")
}

// compileExpression compiles an expression in the environment for new
// expressions (stored ones are never recompiled: they were valid when
// written) and returns its worst-case cost, or the errors that made it
// unusable. Overlong expressions are not compiled at all.
func compileExpression(expression string, derived bool, path *field.Path) (uint64, field.ErrorList) {
	if len(expression) > resourceapi.CELSelectorExpressionMaxLength {
		return 0, field.ErrorList{field.TooLong(path, "", resourceapi.CELSelectorExpressionMaxLength)}
	}
	env := environment.NewExpressions
	result := dracel.GetCompiler(celFeatures).CompileCELExpression(expression, dracel.Options{
		EnvType:          &env,
		DerivedAttribute: derived,
	})
	if result.Error != nil {
		return 0, field.ErrorList{celError(result.Error, expression, path)}
	}
	return result.MaxCost, nil
}

// celError turns a compilation error into the field error upstream gives.
func celError(err *apiservercel.Error, expression string, path *field.Path) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(path, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(path, expression, err.Detail)
	case apiservercel.ErrorTypeInternal:
		return field.InternalError(path, err)
	}
	return field.InternalError(path, fmt.Errorf("unsupported error type: %w", err))
}
