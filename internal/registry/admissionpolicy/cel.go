package admissionpolicy

import (
	"errors"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/svcnet/svcnet/internal/registry/admissionwebhook"
)

// Stored are the expressions of the stored object, by where they appear,
// as upstream's preexistingExpressions: an update compiles them in CEL's
// stored-expression environment, so that an object stored under a more
// permissive CEL library stays writable. As upstream, variables count as
// stored when they are among the validations, and JSON patches when they
// are among the apply configurations (JSONPatches is kept, and not read,
// as upstream keeps it).
type Stored struct {
	MatchConditions     sets.Set[string]
	Validations         sets.Set[string]
	MessageExpressions  sets.Set[string]
	AuditAnnotations    sets.Set[string]
	ApplyConfigurations sets.Set[string]
	JSONPatches         sets.Set[string]
}

// NewStored returns empty sets.
func NewStored() Stored {
	return Stored{
		MatchConditions:     sets.New[string](),
		Validations:         sets.New[string](),
		MessageExpressions:  sets.New[string](),
		AuditAnnotations:    sets.New[string](),
		ApplyConfigurations: sets.New[string](),
		JSONPatches:         sets.New[string](),
	}
}

// NewCompiler is upstream's createCompiler: the shared stateless compiler,
// or, when the policy has variables, a compiler of its own that composes
// them (variables.<name> in later expressions).
func NewCompiler(composition bool) plugincel.Compiler {
	if !composition {
		return admissionwebhook.Compiler()
	}
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		// Cannot happen; upstream reports it and compiles without
		// composition.
		utilruntime.HandleError(err)
		return plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	}
	return c
}

// envType is the environment an expression compiles in.
func envType(stored bool) environment.Type {
	if stored {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

// Compile compiles expr with the variables decls declares; a failure is a
// field error at path whose value is value (upstream reports the trimmed
// or the written expression, depending on the field).
func Compile(c plugincel.Compiler, expr plugincel.ExpressionAccessor, decls plugincel.OptionalVariableDeclarations, stored bool, value string, path *field.Path) field.ErrorList {
	result := c.CompileCELExpression(expr, decls, envType(stored))
	if result.Error == nil {
		return nil
	}
	return field.ErrorList{admissionwebhook.CELError(path, value, result.Error)}
}

// ValidateMatchConditions checks a policy's match conditions, whose
// expressions see params when the policy has a paramKind.
func ValidateMatchConditions(conditions []admissionregistrationv1.MatchCondition, params bool, stored Stored, path *field.Path) field.ErrorList {
	return admissionwebhook.ValidateMatchConditions(conditions, params, stored.MatchConditions, path)
}

// ValidateVariable follows upstream's validateVariable: a CEL identifier
// and an expression, compiled and kept by the composition compiler for
// the expressions after it. As upstream, an expression counts as stored
// when the stored policy has it among its validations.
func ValidateVariable(c plugincel.Compiler, v *admissionregistrationv1.Variable, params bool, stored Stored, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Name) == "" {
		errs = append(errs, field.Required(path.Child("name"), "name is not specified"))
	} else if !isCELIdentifier(v.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), v.Name, "must be a valid CEL identifier"))
	}
	if strings.TrimSpace(v.Expression) == "" {
		return append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	}
	composited, ok := c.(*plugincel.CompositedCompiler)
	if !ok {
		return append(errs, field.InternalError(path, errVariableComposition))
	}
	variable := &validating.Variable{Name: v.Name, Expression: v.Expression}
	result := composited.CompileAndStoreVariable(variable,
		plugincel.OptionalVariableDeclarations{HasParams: params, HasAuthorizer: true}, envType(stored.Validations.Has(v.Expression)))
	if result.Error != nil {
		errs = append(errs, admissionwebhook.CELError(path.Child("expression"), v.Expression, result.Error))
	}
	return errs
}

var errVariableComposition = errors.New("variable composition is not allowed")

// celReserved are the words CEL's grammar reserves.
var celReserved = sets.New("true", "false", "null", "in",
	"as", "break", "const", "continue", "else",
	"for", "function", "if", "import", "let",
	"loop", "package", "namespace", "return",
	"var", "void", "while")

// isCELIdentifier: [_a-zA-Z][_a-zA-Z0-9]*, not reserved.
func isCELIdentifier(name string) bool {
	for i, r := range name {
		letter := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != "" && !celReserved.Has(name)
}
