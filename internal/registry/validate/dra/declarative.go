package dra

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream validates resource.k8s.io twice: by hand, which the rest of this
// package follows, and declaratively, from the +k8s: tags of k8s.io/api,
// whose generated validators are used here as they are. Standard and beta
// declarative rules are enforced in 1.37 (DeclarativeValidationBeta is on
// by default): a hand-written error marked as covered gives way to a
// declarative one of the same type, field and origin, and the declarative
// errors come last.

// declarativeOptions are the options upstream's ResourceSlice strategy
// passes. DRAPartitionableDevicesType is off by default, but then the
// strategy drops the field it guards, so the field is checked as if it
// were on.
var declarativeOptions = map[string]bool{"DRAPartitionableDevicesType": true}

// declarative runs one of k8s.io/api's generated validators, as a create
// when old is nil and as an update otherwise.
func declarative[T any](validator func(context.Context, operation.Operation, *field.Path, *T, *T) field.ErrorList, obj, old *T, path *field.Path) field.ErrorList {
	op := operation.Operation{Type: operation.Create, Options: declarativeOptions}
	if old != nil {
		op.Type = operation.Update
	}
	return validator(context.Background(), op, path, obj, old)
}

// immutableClaimSpec is the declarative rule that a claim's spec never
// changes; its error carries no value.
func immutableClaimSpec(spec, old *resourceapi.ResourceClaimSpec, path *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(spec, old) {
		return nil
	}
	op := operation.Operation{Type: operation.Update, Options: declarativeOptions}
	return validate.Immutable(context.Background(), op, path, spec, old).MarkBeta()
}

// merge is what upstream's ValidateDeclarativelyWithMigrationChecks does
// with both lists when beta declarative rules are enforced.
func merge(handwritten, declarative field.ErrorList) field.ErrorList {
	ctx := context.Background()
	enforced := validate.FilterEnforcedDeclarativeErrors(ctx, declarative, true)
	return append(validate.FilterCoveredHandwrittenErrors(ctx, handwritten, enforced, true), enforced...)
}
