// Package podcertificaterequest is the certificates.k8s.io/v1
// PodCertificateRequest strategy, after upstream's
// pkg/registry/certificates/podcertificaterequest and its validation. A
// kubelet asks a signer for a pod's certificate with one: the request is
// namespaced, names the pod, its service account and its node (each with
// its UID), the signer, the longest life the certificate may have
// (maxExpirationSeconds, a day by default, between an hour and 91 days, a
// day at most for a kubernetes.io signer) and a PKCS#10 request signed
// with the pod's key, whose signature proves the kubelet holds that key.
// The spec never changes; a create starts without status, and an update of
// the object keeps the stored one. The status subresource is the signer's:
// it moves the request once to Issued (a certificate chain whose leaf is
// for the requested key, with notBefore, beginRefreshAt and notAfter
// consistent with it), Denied or Failed, after which nothing changes, and
// a status write that changes anything needs the "sign" verb on the
// signer (or <domain>/*), as upstream's status strategy asks. `kubectl get
// podcertificaterequests` shows NAME, PODNAME, SERVICEACCOUNTNAME,
// NODENAME, SIGNERNAME, STATE and UNVERIFIEDUSERANNOTATIONS, and lists
// select on spec.signerName, spec.podName and spec.nodeName.
package podcertificaterequest

import (
	"context"
	"fmt"
	"time"

	capi "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/certificates"
	"github.com/svcnet/svcnet/internal/registry"
)

// defaultMaxExpirationSeconds is v1's default of
// spec.maxExpirationSeconds, a day.
const defaultMaxExpirationSeconds = 24 * 60 * 60

// Resource describes podcertificaterequests. authorizer decides who may
// sign for a signer, that is write a request's status; nil lets nobody.
func Resource(authorizer authz.Authorizer) *registry.Resource {
	// Upstream has neither short names nor categories, answers a delete
	// with a Status, and leaves metadata.generation alone.
	return &registry.Resource{
		Kind:       capi.SchemeGroupVersion.WithKind("PodCertificateRequest"),
		Resource:   "podcertificaterequests",
		Singular:   "podcertificaterequest",
		Namespaced: true,
		Status:     true,
		Strategy:   strategy{authorizer: authorizer, now: time.Now},
		Columns:    columns(),
		Fields: func(obj runtime.Object) fields.Set {
			r := obj.(*capi.PodCertificateRequest)
			return fields.Set{
				"spec.signerName": r.Spec.SignerName,
				"spec.podName":    r.Spec.PodName,
				"spec.nodeName":   string(r.Spec.NodeName),
			}
		},
	}
}

type strategy struct {
	registry.Base
	authorizer authz.Authorizer
	// now is the API server's clock, against which an issued
	// certificate's notBefore is checked.
	now func() time.Time
}

// Default is v1's defaulting: a day for spec.maxExpirationSeconds.
func (strategy) Default(obj runtime.Object) {
	r := obj.(*capi.PodCertificateRequest)
	if r.Spec.MaxExpirationSeconds == nil {
		d := int32(defaultMaxExpirationSeconds)
		r.Spec.MaxExpirationSeconds = &d
	}
}

// PrepareForCreate starts the request without status.
func (strategy) PrepareForCreate(obj runtime.Object) {
	obj.(*capi.PodCertificateRequest).Status = capi.PodCertificateRequestStatus{}
}

// PrepareForUpdate keeps the stored status: only the status subresource
// writes it.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	obj.(*capi.PodCertificateRequest).Status = old.(*capi.PodCertificateRequest).Status
}

// PrepareForStatusUpdate keeps the stored spec and metadata (labels,
// annotations, finalizers, owner references), as upstream's
// ResetObjectMetaForStatus: a status write changes only status (and
// managed fields).
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	r, prev := obj.(*capi.PodCertificateRequest), old.(*capi.PodCertificateRequest)
	r.Spec = prev.Spec
	r.Labels = prev.Labels
	r.Annotations = prev.Annotations
	r.Finalizers = prev.Finalizers
	r.OwnerReferences = prev.OwnerReferences
}

// Validate is upstream's ValidatePodCertificateRequestCreate; the API
// server checks the metadata.
func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateCreate(obj.(*capi.PodCertificateRequest))
}

// ValidateUpdate is upstream's ValidatePodCertificateRequestUpdate (the
// spec never changes) and, for a write that changes the status (only a
// status write can: an update keeps the stored status),
// ValidatePodCertificateRequestStatusUpdate.
func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	r, prev := obj.(*capi.PodCertificateRequest), old.(*capi.PodCertificateRequest)
	errs := validateSpecUpdate(r, prev)
	if apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
		return errs
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	return append(errs, validateStatusUpdate(r, prev, now())...)
}

// AdmitUpdate is the end of upstream's status strategy's validation: a
// status write that changes the status needs "sign" on the stored
// signer, or on every signer of its domain. As upstream, a refusal is an
// invalid spec.signerName.
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	r, prev := obj.(*capi.PodCertificateRequest), old.(*capi.PodCertificateRequest)
	if sub != "status" || apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
		return nil
	}
	path := field.NewPath("spec", "signerName")
	var errs field.ErrorList
	u, ok := authn.UserFrom(ctx)
	switch {
	case !ok:
		errs = field.ErrorList{field.InternalError(path, fmt.Errorf(`cannot determine calling user to perform "sign" check`))}
	case !certificates.AuthorizedForSigner(ctx, s.authorizer, u, "sign", prev.Spec.SignerName):
		errs = field.ErrorList{field.Forbidden(path, fmt.Sprintf(`User %q is not permitted to "sign" for signer %q`, u.GetName(), prev.Spec.SignerName))}
	default:
		return nil
	}
	return apierrors.NewInvalid(capi.Kind("PodCertificateRequest"), prev.Name, errs)
}

// columns are upstream's printer's, described in v1's words: the server
// fills every cell, as upstream's table convertor (wide).
func columns() []registry.Column {
	spec := capi.PodCertificateRequestSpec{}.SwaggerDoc()
	text := registry.TextColumn[*capi.PodCertificateRequest]
	return []registry.Column{
		registry.NameColumn(),
		text("PodName", spec["podName"], func(r *capi.PodCertificateRequest) string { return r.Spec.PodName }),
		text("ServiceAccountName", spec["serviceAccountName"], func(r *capi.PodCertificateRequest) string { return r.Spec.ServiceAccountName }),
		text("NodeName", spec["nodeName"], func(r *capi.PodCertificateRequest) string { return string(r.Spec.NodeName) }),
		text("SignerName", spec["signerName"], func(r *capi.PodCertificateRequest) string { return r.Spec.SignerName }),
		text("State", "Is the request Pending, Issued, Denied, or Failed?", State),
		text("UnverifiedUserAnnotations", spec["unverifiedUserAnnotations"], func(r *capi.PodCertificateRequest) string {
			return labels.FormatLabels(r.Spec.UnverifiedUserAnnotations)
		}),
	}
}

// State is the STATE column: the type of the last Issued, Denied or
// Failed condition, else Pending, whatever the conditions' status, as
// upstream's printer.
func State(r *capi.PodCertificateRequest) string {
	state := "Pending"
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case capi.PodCertificateRequestConditionTypeIssued, capi.PodCertificateRequestConditionTypeDenied, capi.PodCertificateRequestConditionTypeFailed:
			state = c.Type
		}
	}
	return state
}
