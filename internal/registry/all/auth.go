package all

import (
	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/clusterrole"
	"github.com/svcnet/svcnet/internal/registry/clusterrolebinding"
	"github.com/svcnet/svcnet/internal/registry/localsubjectaccessreview"
	"github.com/svcnet/svcnet/internal/registry/role"
	"github.com/svcnet/svcnet/internal/registry/rolebinding"
	"github.com/svcnet/svcnet/internal/registry/selfsubjectaccessreview"
	"github.com/svcnet/svcnet/internal/registry/selfsubjectreview"
	"github.com/svcnet/svcnet/internal/registry/selfsubjectrulesreview"
	"github.com/svcnet/svcnet/internal/registry/subjectaccessreview"
)

// auth returns the resources of authentication.k8s.io,
// authorization.k8s.io and rbac.authorization.k8s.io.
func auth(d Deps) []*registry.Resource {
	guard := rbac.NewEscalation(d.RBAC, d.Authorizer)
	return []*registry.Resource{
		selfsubjectreview.Resource(),
		subjectaccessreview.Resource(d.Authorizer),
		selfsubjectaccessreview.Resource(d.Authorizer),
		localsubjectaccessreview.Resource(d.Authorizer),
		selfsubjectrulesreview.Resource(d.RBAC),
		role.Resource(guard),
		clusterrole.Resource(guard),
		rolebinding.Resource(guard),
		clusterrolebinding.Resource(guard),
	}
}
