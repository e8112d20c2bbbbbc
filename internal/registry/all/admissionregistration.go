package all

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/admissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/mutatingadmissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/mutatingadmissionpolicybinding"
	"github.com/svcnet/svcnet/internal/registry/mutatingwebhookconfiguration"
	"github.com/svcnet/svcnet/internal/registry/validatingadmissionpolicy"
	"github.com/svcnet/svcnet/internal/registry/validatingadmissionpolicybinding"
	"github.com/svcnet/svcnet/internal/registry/validatingwebhookconfiguration"
)

// admissionregistration returns the resources of
// admissionregistration.k8s.io/v1, which the API server's admission reads:
// the webhook configurations, and the admission policies and their
// bindings, whose paramKind and paramRef the authorization chain allows
// (the kinds resolved and the bound policies read through the loopback
// client, as upstream through discovery and its policy storage).
func admissionregistration(d Deps) []*registry.Resource {
	access := admissionpolicy.Access{Authorizer: d.Authorizer}
	var validatingParams, mutatingParams admissionpolicy.ParamKindOf
	if d.Client != nil {
		access.Resolve = admissionpolicy.DiscoveryResolver(d.Client.Discovery())
		policies := d.Client.AdmissionregistrationV1()
		validatingParams = func(ctx context.Context, name string) (*admissionregistrationv1.ParamKind, error) {
			p, err := policies.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return p.Spec.ParamKind, nil
		}
		mutatingParams = func(ctx context.Context, name string) (*admissionregistrationv1.ParamKind, error) {
			p, err := policies.MutatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return p.Spec.ParamKind, nil
		}
	}
	return []*registry.Resource{
		validatingwebhookconfiguration.Resource(),
		mutatingwebhookconfiguration.Resource(),
		validatingadmissionpolicy.Resource(access),
		validatingadmissionpolicybinding.Resource(access, validatingParams),
		mutatingadmissionpolicy.Resource(access),
		mutatingadmissionpolicybinding.Resource(access, mutatingParams),
	}
}
