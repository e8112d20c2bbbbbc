package serviceaccount

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
)

// Tokens is what serviceaccounts/token (TokenRequest) needs: the signer,
// the API server's audiences (a request's default), and where the service
// account and the object a token is bound to are read.
type Tokens struct {
	Issuer    *serviceaccount.Issuer
	Audiences []string
	Objects   serviceaccount.Objects
}

var tokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// request is upstream's TokenREST.Create: the request is checked against
// the service account, bound to a pod (and its node), secret or node that
// must exist (with the UID given, if any), and answered with a signed
// token. A pod's kube-api-access token (3607 s, the API server's
// audiences) is issued for a year, warning after the time asked.
func (t *Tokens) request(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest)
	gk := tokenRequestKind.GroupKind()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != namespace {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	sa, err := t.Objects.ServiceAccount(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if req.UID != "" && req.UID != sa.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: gk.Group, Resource: gk.Kind}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.UID))
	}
	if req.Spec.ExpirationSeconds == nil {
		s := int64(serviceaccount.DefaultExpirationSeconds)
		req.Spec.ExpirationSeconds = &s
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = t.Audiences
	}
	req.Name, req.Namespace, req.UID = sa.Name, sa.Namespace, sa.UID
	now := time.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	if errs := validateTokenRequest(req); len(errs) > 0 {
		return nil, apierrors.NewInvalid(gk, "", errs)
	}
	bound, err := t.bind(ctx, namespace, name, req.Spec.BoundObjectRef)
	if err != nil {
		return nil, err
	}
	asked := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	exp, warnAfter := asked, time.Duration(0)
	if bound.Pod != nil && *req.Spec.ExpirationSeconds == serviceaccount.WarnOnlyExpirationSeconds && t.apiAudiences(req.Spec.Audiences) {
		exp, warnAfter = serviceaccount.ExtendedExpiration, asked
	}
	token, err := t.Issuer.Token(sa, bound, exp, warnAfter, req.Spec.Audiences)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %v", err))
	}
	req.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(now.Add(asked))}
	return req, nil
}

// bind finds the object a token is bound to, as upstream.
func (t *Tokens) bind(ctx context.Context, namespace, saName string, ref *authenticationv1.BoundObjectReference) (serviceaccount.Bound, error) {
	var b serviceaccount.Bound
	if ref == nil {
		return b, nil
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid string
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, err := t.Objects.Pod(ctx, namespace, ref.Name)
		if err != nil {
			return b, err
		}
		if saName != pod.Spec.ServiceAccountName {
			return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", saName))
		}
		b.Pod, uid = pod, string(pod.UID)
		if pod.Spec.NodeName != "" {
			node, err := t.Objects.Node(ctx, pod.Spec.NodeName)
			switch {
			case apierrors.IsNotFound(err):
				node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName}}
			case err != nil:
				return b, apierrors.NewInternalError(err)
			}
			b.Node = node
		}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, err := t.Objects.Node(ctx, ref.Name)
		if err != nil {
			return b, err
		}
		b.Node, uid = node, string(node.UID)
	case gvk.Group == "" && gvk.Kind == "Secret":
		sec, err := t.Objects.Secret(ctx, namespace, ref.Name)
		if err != nil {
			return b, err
		}
		b.Secret, uid = sec, string(sec.UID)
	default:
		return b, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return b, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return b, nil
}

// apiAudiences reports whether auds are all the API server's own.
func (t *Tokens) apiAudiences(auds []string) bool {
	for _, a := range auds {
		found := false
		for _, own := range t.Audiences {
			found = found || a == own
		}
		if !found {
			return false
		}
	}
	return true
}

// validateTokenRequest is upstream's ValidateTokenRequest.
func validateTokenRequest(req *authenticationv1.TokenRequest) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "expirationSeconds")
	switch s := *req.Spec.ExpirationSeconds; {
	case s < 10*60:
		errs = append(errs, field.Invalid(p, s, "may not specify a duration less than 10 minutes"))
	case s > 1<<32:
		errs = append(errs, field.Invalid(p, s, "may not specify a duration larger than 2^32 seconds"))
	}
	return errs
}
