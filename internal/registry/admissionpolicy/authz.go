package admissionpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/discovery"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
)

// Access authorizes the parameters a policy or binding names, as
// upstream's strategies of the four kinds do once an object passes
// validation: whoever writes a policy must be able to read every object
// of its paramKind, and whoever writes a binding the objects its paramRef
// names, so that a policy cannot be used to read what its author cannot.
type Access struct {
	// Authorizer is the authorization chain; nil authorizes nothing
	// (every write passes), as upstream without an authorizer.
	Authorizer authz.Authorizer
	// Resolve finds the resource of a kind (upstream asks discovery);
	// nil, or an error, leaves every resource of the group ("*").
	Resolve func(schema.GroupVersionKind) (schema.GroupVersionResource, error)
}

// ParamKindOf returns the paramKind of the named policy (nil when it has
// none), as upstream's PolicyGetter reads the policy a binding names.
type ParamKindOf func(ctx context.Context, policy string) (*admissionregistrationv1.ParamKind, error)

// privileged reports whether the writer is a member of system:masters,
// whom upstream never checks (rbac's EscalationAllowed).
func privileged(ctx context.Context) bool {
	u, ok := authn.UserFrom(ctx)
	return ok && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup)
}

func (a Access) resolve(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	if a.Resolve == nil {
		return schema.GroupVersionResource{}, errors.New("no resource resolver")
	}
	return a.Resolve(gvk)
}

// ParamKind requires the writer of a policy with paramKind pk to be
// allowed to get every object of that kind, as upstream's authorize of
// ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
func (a Access) ParamKind(ctx context.Context, pk *admissionregistrationv1.ParamKind) error {
	if a.Authorizer == nil || pk == nil || privileged(ctx) {
		return nil
	}
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return errors.New("cannot identify user to authorize read access to paramKind resources")
	}
	// Every group, version and resource unless the kind resolves.
	resource, group, version := "*", "*", "*"
	if gv, err := schema.ParseGroupVersion(pk.APIVersion); err == nil {
		group, version = gv.Group, gv.Version
		if gvr, err := a.resolve(gv.WithKind(pk.Kind)); err == nil {
			resource = gvr.Resource
		}
	}
	d, _, err := a.Authorizer.Authorize(ctx, authz.Attributes{User: u, Verb: "get", ResourceRequest: true,
		Name: "*", Namespace: "*", APIGroup: group, APIVersion: version, Resource: resource})
	if err != nil {
		return err
	}
	if d != authz.Allow {
		// Upstream prints the user as %v prints its user.Info.
		return fmt.Errorf(`user %v must have "get" permission on all objects of the referenced paramKind (kind=%s, apiVersion=%s)`, u, pk.Kind, pk.APIVersion)
	}
	return nil
}

// ParamRef requires the writer of a binding of policy with paramRef pr to
// be allowed to get the object it names (list, for a selector), of the
// policy's paramKind, as upstream's authorize of
// ValidatingAdmissionPolicyBinding and MutatingAdmissionPolicyBinding;
// mutating gives the latter's messages.
func (a Access) ParamRef(ctx context.Context, policy string, pr *admissionregistrationv1.ParamRef, paramKindOf ParamKindOf, mutating bool) error {
	if a.Authorizer == nil || pr == nil || privileged(ctx) {
		return nil
	}
	u, ok := authn.UserFrom(ctx)
	if !ok {
		return errors.New("cannot identify user to authorize read access to paramRef object")
	}
	resource, group, version := "*", "*", "*"
	var pk *admissionregistrationv1.ParamKind
	var policyErr, parseErr, resolveErr error
	if paramKindOf == nil {
		policyErr = errors.New("no policy getter")
	} else {
		pk, policyErr = paramKindOf(ctx, policy)
	}
	if policyErr == nil && pk != nil {
		var gv schema.GroupVersion
		if gv, parseErr = schema.ParseGroupVersion(pk.APIVersion); parseErr == nil {
			group, version = gv.Group, gv.Version
			var gvr schema.GroupVersionResource
			if gvr, resolveErr = a.resolve(gv.WithKind(pk.Kind)); resolveErr == nil {
				resource = gvr.Resource
			}
		}
	}
	verb := "get"
	if pr.Name == "" {
		verb = "list"
	}
	// An empty namespace asks about every namespace.
	d, _, err := a.Authorizer.Authorize(ctx, authz.Attributes{User: u, Verb: verb, ResourceRequest: true,
		Name: pr.Name, Namespace: pr.Namespace, APIGroup: group, APIVersion: version, Resource: resource})
	if err != nil {
		if mutating {
			return err
		}
		return fmt.Errorf("failed to authorize request: %w", err)
	}
	if d == authz.Allow {
		return nil
	}
	const all = `to determine minimum required permissions and user %v does not have "%v" permission for all groups, versions and resources`
	switch {
	case policyErr != nil:
		return fmt.Errorf("unable to get policy %s "+all, policy, u, verb)
	case parseErr != nil:
		return fmt.Errorf("unable to parse paramKind %v "+all, internal(pk), u, verb)
	case resolveErr != nil:
		return fmt.Errorf("unable to resolve paramKind %v "+all, internal(pk), u, verb)
	case mutating:
		// Upstream's MutatingAdmissionPolicyBinding names the verb
		// first.
		return fmt.Errorf(`user %v does not have "%v" permission on the object referenced by paramRef`, verb, u)
	}
	return fmt.Errorf(`user %v does not have "%v" permission on the object referenced by paramRef`, u, verb)
}

// internalParamKind is upstream's internal ParamKind, which its messages
// print with %v (the v1 type prints itself otherwise).
type internalParamKind struct{ APIVersion, Kind string }

func internal(pk *admissionregistrationv1.ParamKind) *internalParamKind {
	return &internalParamKind{APIVersion: pk.APIVersion, Kind: pk.Kind}
}

// Forbidden is the answer to a write refused by Access: upstream adds the
// refusal to the object's validation errors (422 Invalid), at path
// (spec.paramKind or spec.paramRef).
func Forbidden(kind schema.GroupKind, name string, path *field.Path, err error) error {
	return apierrors.NewInvalid(kind, name, field.ErrorList{field.Forbidden(path, err.Error())})
}

// ValidForAdmission reports whether a new object (before its name is
// generated) passes validate and the metadata checks: upstream authorizes
// only such objects, so the refusal of another is left to validation. A
// name to come from generateName is stood in for by the prefix and five
// characters, as the name generator makes it.
func ValidForAdmission[T interface {
	runtime.Object
	metav1.Object
}](obj T, validate func(runtime.Object) field.ErrorList) bool {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj = obj.DeepCopyObject().(T)
		obj.SetName(obj.GetGenerateName() + "xxxxx")
	}
	if len(apivalidation.ValidateObjectMetaAccessor(obj, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))) > 0 {
		return false
	}
	return len(validate(obj)) == 0
}

// DiscoveryResolver resolves kinds through the API server's discovery, as
// upstream's discoveryResourceResolver: the first resource of the kind in
// its group-version that is not a subresource.
func DiscoveryResolver(d discovery.DiscoveryInterface) func(schema.GroupVersionKind) (schema.GroupVersionResource, error) {
	return func(gvk schema.GroupVersionKind) (schema.GroupVersionResource, error) {
		gv := gvk.GroupVersion()
		list, err := d.ServerResourcesForGroupVersion(gv.String())
		if err != nil {
			return schema.GroupVersionResource{}, err
		}
		for _, r := range list.APIResources {
			if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") ||
				(r.Group != "" && r.Group != gvk.Group) || (r.Version != "" && r.Version != gvk.Version) {
				continue
			}
			return gv.WithResource(r.Name), nil
		}
		return schema.GroupVersionResource{}, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
}
