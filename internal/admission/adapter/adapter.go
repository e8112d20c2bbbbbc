// Package adapter lets k8s.io/apiserver's admission plugins (the
// admission webhooks, ValidatingAdmissionPolicy, MutatingAdmissionPolicy)
// judge svcnet's writes: a write's attributes in upstream's form, the
// object interfaces the plugins make, type and convert objects with, and
// svcnet's authorizer as upstream's.
package adapter

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/registry"
)

// Attributes are a's in upstream's form, with the objects' apiVersion and
// kind set, as the AdmissionReview carries them.
func Attributes(a *admission.Attributes) k8sadmission.Attributes {
	for _, o := range []runtime.Object{a.Object, a.OldObject, a.Options} {
		if o != nil {
			registry.SetKind(o)
		}
	}
	return k8sadmission.NewAttributesRecord(a.Object, a.OldObject, a.Kind, a.Namespace, a.Name,
		a.Resource.WithVersion(a.Version), a.Subresource, k8sadmission.Operation(a.Operation), a.Options, a.DryRun, a.User)
}

// Objects are what the plugins make, type and convert objects with. The
// API server serves each kind at the version it stores, so a conversion
// is a copy; defaulting is the API server's, after admission.
var Objects k8sadmission.ObjectInterfaces = objects{}

type objects struct{}

func (objects) GetObjectCreater() runtime.ObjectCreater { return creater{} }
func (objects) GetObjectTyper() runtime.ObjectTyper     { return registry.Scheme }
func (objects) GetObjectDefaulter() runtime.ObjectDefaulter {
	return noDefaults{}
}
func (objects) GetObjectConvertor() runtime.ObjectConvertor { return convertor{} }
func (objects) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return equivalents
}

// equivalents knows no resource served under two names.
var equivalents = runtime.NewEquivalentResourceRegistry()

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// creater makes the scheme's kinds, and custom resources unstructured.
type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if registry.Scheme.Recognizes(gvk) {
		return registry.Scheme.New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// convertor copies an object into another of its type, or between its
// typed and unstructured forms.
type convertor struct{}

func (convertor) Convert(in, out, _ interface{}) error {
	src, ok := in.(runtime.Object)
	if !ok {
		return fmt.Errorf("cannot convert %T", in)
	}
	su, fromUnstructured := in.(*unstructured.Unstructured)
	u, toUnstructured := out.(*unstructured.Unstructured)
	switch {
	case fromUnstructured && toUnstructured:
		u.Object = runtime.DeepCopyJSON(su.Object)
		return nil
	case fromUnstructured:
		// A mutating policy's object, applied as unstructured, replaces
		// the typed one whole.
		if ov := reflect.ValueOf(out); ov.Kind() == reflect.Pointer {
			ov.Elem().Set(reflect.Zero(ov.Elem().Type()))
		}
		return runtime.DefaultUnstructuredConverter.FromUnstructured(su.Object, out)
	case toUnstructured:
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
		if err != nil {
			return err
		}
		u.Object = content
		return nil
	}
	iv, ov := reflect.ValueOf(in), reflect.ValueOf(out)
	if iv.Type() != ov.Type() || ov.Kind() != reflect.Pointer {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	ov.Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
	return nil
}

func (convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	if target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk}); ok && target == gvk {
		return in, nil
	}
	return nil, fmt.Errorf("cannot convert %s to another version", gvk)
}

func (convertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// Authorizer is svcnet's authorizer as upstream's, for the `authorizer`
// variable of admission policies' CEL expressions.
type Authorizer struct{ authz.Authorizer }

// Authorize implements authorizer.UnconditionalAuthorizer.
func (a Authorizer) Authorize(ctx context.Context, attr authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := a.Authorizer.Authorize(ctx, authz.Attributes{User: attr.GetUser(), Verb: attr.GetVerb(),
		ResourceRequest: attr.IsResourceRequest(), Namespace: attr.GetNamespace(), APIGroup: attr.GetAPIGroup(),
		APIVersion: attr.GetAPIVersion(), Resource: attr.GetResource(), Subresource: attr.GetSubresource(),
		Name: attr.GetName(), Path: attr.GetPath()})
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, err
	case authz.Deny:
		return authorizer.DecisionDeny, reason, err
	}
	return authorizer.DecisionNoOpinion, reason, err
}
