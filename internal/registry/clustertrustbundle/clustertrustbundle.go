// Package clustertrustbundle is the certificates.k8s.io/v1
// ClusterTrustBundle strategy, after upstream's
// pkg/registry/certificates/clustertrustbundle, its validation and its
// ClusterTrustBundleAttest admission plugin. Bundles are cluster-scoped
// and have no status. A bundle of a signer is named with the signer's name,
// slashes turned to colons, as a prefix ("example.com:foo:v1" for
// example.com/foo); one without a signer has no colon in its name. The
// signer's name is well formed and never changes. The trust bundle holds
// only CERTIFICATE PEM blocks, without headers, each an X.509 CA
// certificate, at least one and none twice, in 1 MiB at most; an update
// that keeps it does not parse it again. Writing a bundle of a signer
// needs the "attest" verb on that signer, or on <domain>/*, as upstream's
// plugin asks, unless the update changes only what the garbage collector
// changes. `kubectl get clustertrustbundles` shows NAME and SIGNERNAME,
// and lists select on spec.signerName. The kubelet reads bundles for
// projected volumes; the default policy lets nodes and service accounts
// read them.
package clustertrustbundle

import (
	"context"
	"fmt"

	capi "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/certificates"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/role"
	"github.com/svcnet/svcnet/internal/storage"
)

var groupResource = capi.Resource("clustertrustbundles")

// Resource describes clustertrustbundles. authorizer decides who may
// attest for a signer; nil lets nobody write a bundle that names one.
func Resource(authorizer authz.Authorizer) *registry.Resource {
	// Upstream has neither short names nor categories, answers a delete
	// with a Status, and leaves metadata.generation alone.
	return &registry.Resource{
		Kind:     capi.SchemeGroupVersion.WithKind("ClusterTrustBundle"),
		Resource: "clustertrustbundles",
		Singular: "clustertrustbundle",
		// A bundle's name follows from its spec.signerName, which a
		// name check cannot see: Validate checks the name.
		NameValidation: func(string, bool) []string { return nil },
		Strategy:       strategy{authorizer: authorizer},
		Columns:        columns(),
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": obj.(*capi.ClusterTrustBundle).Spec.SignerName}
		},
	}
}

type strategy struct {
	registry.Base
	authorizer authz.Authorizer
}

// Validate is upstream's ValidateClusterTrustBundle; the API server checks
// the rest of the metadata.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validate(obj.(*capi.ClusterTrustBundle), true)
}

// ValidateUpdate is upstream's ValidateClusterTrustBundleUpdate.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return validateUpdate(obj.(*capi.ClusterTrustBundle), old.(*capi.ClusterTrustBundle))
}

// AdmitUpdate is upstream's ClusterTrustBundleAttest plugin on update: it
// runs where upstream's does, after validation (which keeps the signer
// from changing, so the new object's signer is the one that counts) and
// before the admission chain.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	if sub != "" {
		return nil
	}
	return s.attest(ctx, obj.(*capi.ClusterTrustBundle), old)
}

// PrepareWrite implements registry.Writer for the plugin on create: the
// API server has no hook between a create's validation and its admission
// chain, so the check comes after both (webhooks that refuse the bundle
// speak first), on the object mutating admission left, dry runs too.
// Updates are checked by AdmitUpdate.
func (s strategy) PrepareWrite(ctx context.Context, obj, old runtime.Object, _ bool) (storage.Extra, func(error), error) {
	if old != nil {
		return storage.Extra{}, func(error) {}, nil
	}
	return storage.Extra{}, func(error) {}, s.attest(ctx, obj.(*capi.ClusterTrustBundle), nil)
}

// attest refuses a write of a bundle that names a signer unless the
// writer may attest for the signer (or for every signer of its domain).
// A bundle without a signer, and an update that changes only owner
// references, finalizers and managed fields (the garbage collector's and
// storage migration's writes), need no right.
func (s strategy) attest(ctx context.Context, b *capi.ClusterTrustBundle, old runtime.Object) error {
	if b.Spec.SignerName == "" || (old != nil && role.IsOnlyMutatingGCFields(b, old)) {
		return nil
	}
	u, _ := authn.UserFrom(ctx)
	if certificates.AuthorizedForSigner(ctx, s.authorizer, u, "attest", b.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(groupResource, b.Name,
		fmt.Errorf("user not permitted to attest for signerName %q", b.Spec.SignerName))
}

// columns are upstream's printer's: NAME and SIGNERNAME ("<none>" for a
// bundle without a signer), described in v1's words, and no AGE.
func columns() []registry.Column {
	spec := capi.ClusterTrustBundleSpec{}.SwaggerDoc()
	return []registry.Column{
		registry.NameColumn(),
		registry.TextColumn("SignerName", spec["signerName"], func(b *capi.ClusterTrustBundle) string {
			if b.Spec.SignerName == "" {
				return "<none>"
			}
			return b.Spec.SignerName
		}),
	}
}
