package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/certificatesigningrequest"
)

// certificates returns the resources of certificates.k8s.io, whose
// approvals and signatures the authorization chain allows.
func certificates(d Deps) []*registry.Resource {
	return []*registry.Resource{certificatesigningrequest.Resource(d.Authorizer)}
}
