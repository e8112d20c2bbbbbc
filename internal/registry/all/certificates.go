package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/certificatesigningrequest"
	"github.com/svcnet/svcnet/internal/registry/clustertrustbundle"
	"github.com/svcnet/svcnet/internal/registry/podcertificaterequest"
)

// certificates returns the resources of certificates.k8s.io, whose
// approvals, signatures (of certificate signing and pod certificate
// requests) and attestations the authorization chain allows.
func certificates(d Deps) []*registry.Resource {
	return []*registry.Resource{
		certificatesigningrequest.Resource(d.Authorizer),
		clustertrustbundle.Resource(d.Authorizer),
		podcertificaterequest.Resource(d.Authorizer),
	}
}
