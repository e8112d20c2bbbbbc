package admissionwebhook

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The CEL compiler of match conditions, built on first use: building its
// environments takes a while, and most configurations have no conditions.
var (
	compilerOnce sync.Once
	compiler     plugincel.Compiler
)

// Compiler is upstream's strict stateless CEL compiler (no variable
// composition), shared by every validation that compiles expressions.
func Compiler() plugincel.Compiler {
	compilerOnce.Do(func() {
		compiler = plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	})
	return compiler
}

// compileMatchCondition compiles a match condition as upstream does: a
// bool expression over object, oldObject, request and authorizer (and
// params, for a policy with a paramKind), in the stored-expression
// environment when the stored configuration already held it, so that an
// update keeps accepting it.
func compileMatchCondition(expr string, params, stored bool, path *field.Path) field.ErrorList {
	env := environment.NewExpressions
	if stored {
		env = environment.StoredExpressions
	}
	result := Compiler().CompileCELExpression(&matchconditions.MatchCondition{Expression: expr},
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, env)
	if result.Error == nil {
		return nil
	}
	return field.ErrorList{CELError(path, expr, result.Error)}
}

// CELError turns a compilation error into a field error, as upstream's
// convertCELErrorToValidationError.
func CELError(path *field.Path, expr string, err *apiservercel.Error) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(path, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(path, expr, err.Detail)
	case apiservercel.ErrorTypeInternal:
		return field.InternalError(path, err)
	}
	return field.InternalError(path, fmt.Errorf("unsupported error type: %w", err))
}
