// Package certificatesigningrequest is the certificates.k8s.io/v1
// CertificateSigningRequest strategy, after upstream's
// pkg/registry/certificates/certificates and its validation: a create
// records who asks (spec.username, uid, groups, extra, from the request's
// user) and starts without status; the spec never changes afterwards; the
// status subresource is where a signer sets status.certificate (once), and
// the approval subresource the only place the Approved and Denied
// conditions are added, which exclude each other. As upstream's admission
// plugins, approving needs the "approve" verb and issuing the "sign" verb
// on the signers resource of the request's signerName (or of
// <domain>/*), and a kubernetes.io/kube-apiserver-client request may not
// ask for system:masters. `kubectl get csr` shows NAME, AGE, SIGNERNAME,
// REQUESTOR, REQUESTEDDURATION and CONDITION.
package certificatesigningrequest

import (
	"context"
	"fmt"
	"slices"
	"time"

	capi "k8s.io/api/certificates/v1"
	capiv1beta1 "k8s.io/api/certificates/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authn"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/certificates"
	"github.com/svcnet/svcnet/internal/registry"
)

// Approval is the subresource that approves or denies a request.
const Approval = "approval"

var groupResource = capi.Resource("certificatesigningrequests")

// Resource describes certificatesigningrequests. authorizer decides who
// may approve and sign requests of a signer; nil lets nobody.
func Resource(authorizer authz.Authorizer) *registry.Resource {
	s := strategy{authorizer: authorizer}
	return &registry.Resource{
		Kind:       capi.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
		Resource:   "certificatesigningrequests",
		Singular:   "certificatesigningrequest",
		ShortNames: []string{"csr"},
		// Upstream does not care what requests are called, but a name
		// is a path segment.
		NameValidation: func(name string, prefix bool) []string { return path.ValidatePathSegmentName(name, prefix) },
		Status:         true,
		Strategy:       s,
		Subresources: map[string]registry.Subresource{
			Approval: {PrepareForUpdate: prepareApproval, ValidateUpdate: validateApproval},
		},
		Columns: columns(),
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.signerName": obj.(*capi.CertificateSigningRequest).Spec.SignerName}
		},
	}
}

type strategy struct {
	registry.Base
	authorizer authz.Authorizer
}

// Admit records the requesting user in the spec, as upstream's
// PrepareForCreate does, and refuses a kube-apiserver-client request for
// system:masters (upstream's CertificateSubjectRestriction admission).
func (strategy) Admit(ctx context.Context, obj runtime.Object) error {
	csr := obj.(*capi.CertificateSigningRequest)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups, csr.Spec.Extra = "", "", nil, nil
	if u, ok := authn.UserFrom(ctx); ok {
		csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			csr.Spec.Extra = map[string]capi.ExtraValue{}
			for k, v := range extra {
				csr.Spec.Extra[k] = v
			}
		}
	}
	if csr.Spec.SignerName != capi.KubeAPIServerClientSignerName {
		return nil
	}
	req, err := certificates.ParseCSR(csr.Spec.Request)
	if err != nil {
		return nil // validation refuses it
	}
	if slices.Contains(req.Subject.Organization, user.SystemPrivilegedGroup) {
		return apierrors.NewForbidden(groupResource, csr.Name,
			fmt.Errorf("use of %s signer with %s group is not allowed", capi.KubeAPIServerClientSignerName, user.SystemPrivilegedGroup))
	}
	return nil
}

// PrepareForUpdate keeps spec and status: an update of the object itself
// changes only its metadata.
func (strategy) PrepareForUpdate(obj, old runtime.Object) {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	csr.Spec = prev.Spec
	csr.Status = prev.Status
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	csr := obj.(*capi.CertificateSigningRequest)
	return validate(csr, optionsFor(csr, nil))
}

// ValidateUpdate is upstream's status update validation: an update of the
// object keeps the stored status, so only a status write can set the
// certificate.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	o := optionsFor(csr, prev)
	o.setCertificate = true
	return validateUpdate(csr, prev, o)
}

// PrepareForStatusUpdate keeps the Approved and Denied conditions as
// stored (adding or removing one fails validation), and stamps the
// conditions' times.
func (strategy) PrepareForStatusUpdate(obj, old runtime.Object) {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	keepConditions(csr, prev, capi.CertificateApproved)
	keepConditions(csr, prev, capi.CertificateDenied)
	stampConditions(csr, prev, metav1.Now())
}

// keepConditions puts back the stored conditions of type t, when the
// write keeps their number.
func keepConditions(csr, old *capi.CertificateSigningRequest, t capi.RequestConditionType) {
	var was, is []int
	for i, c := range old.Status.Conditions {
		if c.Type == t {
			was = append(was, i)
		}
	}
	for i, c := range csr.Status.Conditions {
		if c.Type == t {
			is = append(is, i)
		}
	}
	if len(was) != len(is) {
		return
	}
	for n, i := range is {
		csr.Status.Conditions[i] = old.Status.Conditions[was[n]]
	}
}

// stampConditions sets a missing lastUpdateTime to now, and a missing
// lastTransitionTime to that of a stored condition of the same type and
// status, else to now.
func stampConditions(csr, old *capi.CertificateSigningRequest, now metav1.Time) {
	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		if c.LastUpdateTime.IsZero() {
			c.LastUpdateTime = now
		}
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		c.LastTransitionTime = now
		for _, o := range old.Status.Conditions {
			if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
				c.LastTransitionTime = o.LastTransitionTime
				break
			}
		}
	}
}

// prepareApproval takes only the conditions of the write, stamped.
func prepareApproval(obj, old runtime.Object) {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	stampConditions(csr, prev, metav1.Now())
	conditions := csr.Status.Conditions
	csr.Spec = prev.Spec
	csr.Status = prev.Status
	csr.Status.Conditions = conditions
}

func validateApproval(obj, old runtime.Object) field.ErrorList {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	o := optionsFor(csr, prev)
	o.setApproval = true
	return validateUpdate(csr, prev, o)
}

// AdmitUpdate checks the writer's rights on the request's signer:
// "approve" for an approval, "sign" for a status write that changes the
// certificate or the conditions (upstream's CertificateApproval and
// CertificateSigning admission).
func (s strategy) AdmitUpdate(ctx context.Context, sub string, obj, old runtime.Object) error {
	csr, prev := obj.(*capi.CertificateSigningRequest), old.(*capi.CertificateSigningRequest)
	verb := ""
	switch sub {
	case Approval:
		verb = "approve"
	case "status":
		if slices.Equal(csr.Status.Certificate, prev.Status.Certificate) && apiequality.Semantic.DeepEqual(csr.Status.Conditions, prev.Status.Conditions) {
			return nil
		}
		verb = "sign"
	default:
		return nil
	}
	// As upstream, the stored signer is the one that counts.
	if s.allowed(ctx, verb, prev.Spec.SignerName) {
		return nil
	}
	return apierrors.NewForbidden(groupResource, prev.Name,
		fmt.Errorf("user not permitted to %s requests with signerName %q", verb, prev.Spec.SignerName))
}

// allowed asks whether the request's user may verb the signer, or every
// signer of its domain (<domain>/*), as upstream's
// IsAuthorizedForSignerName.
func (s strategy) allowed(ctx context.Context, verb, signer string) bool {
	u, _ := authn.UserFrom(ctx)
	return certificates.AuthorizedForSigner(ctx, s.authorizer, u, verb, signer)
}

// columns are upstream's printer columns, described as upstream does, in
// the words of v1beta1.
func columns() []registry.Column {
	spec, status := capiv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc(), capiv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()
	text := registry.TextColumn[*capi.CertificateSigningRequest]
	return []registry.Column{
		registry.NameColumn(),
		registry.AgeColumn(),
		text("SignerName", spec["signerName"], func(csr *capi.CertificateSigningRequest) string { return orNone(csr.Spec.SignerName) }),
		// Upstream describes the requestor by the request's field.
		text("Requestor", spec["request"], func(csr *capi.CertificateSigningRequest) string { return csr.Spec.Username }),
		text("RequestedDuration", spec["expirationSeconds"], func(csr *capi.CertificateSigningRequest) string {
			if csr.Spec.ExpirationSeconds == nil {
				return "<none>"
			}
			return duration.HumanDuration(time.Duration(*csr.Spec.ExpirationSeconds) * time.Second)
		}),
		text("Condition", status["conditions"], Condition),
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// Condition is the CONDITION column: Denied, Approved or Pending, then
// ",Failed" and ",Issued" when they apply.
func Condition(csr *capi.CertificateSigningRequest) string {
	approved, denied := certificates.Approval(&csr.Status)
	out := "Pending"
	switch {
	case denied:
		out = "Denied"
	case approved:
		out = "Approved"
	}
	if slices.ContainsFunc(csr.Status.Conditions, func(c capi.CertificateSigningRequestCondition) bool { return c.Type == capi.CertificateFailed }) {
		out += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		out += ",Issued"
	}
	return out
}
