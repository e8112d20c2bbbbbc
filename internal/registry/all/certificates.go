package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/certificatesigningrequest"
	"github.com/svcnet/svcnet/internal/registry/clustertrustbundle"
)

// certificates returns the resources of certificates.k8s.io, whose
// approvals, signatures and attestations the authorization chain allows.
func certificates(d Deps) []*registry.Resource {
	return []*registry.Resource{
		certificatesigningrequest.Resource(d.Authorizer),
		clustertrustbundle.Resource(d.Authorizer),
	}
}
