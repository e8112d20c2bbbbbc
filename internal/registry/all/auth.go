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
	"github.com/svcnet/svcnet/internal/registry/tokenreview"
)

// apiAudiences are the audiences of the API server's own tokens.
func apiAudiences(d Deps) []string {
	if d.Tokens == nil {
		return nil
	}
	return d.Tokens.Audiences
}

// auth returns the resources of authentication.k8s.io,
// authorization.k8s.io and rbac.authorization.k8s.io.
func auth(d Deps) []*registry.Resource {
	guard := rbac.NewEscalation(d.RBAC, d.Authorizer)
	return []*registry.Resource{
		selfsubjectreview.Resource(),
		tokenreview.Resource(d.Authenticator, apiAudiences(d)),
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
