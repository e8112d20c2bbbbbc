package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/mutatingwebhookconfiguration"
	"github.com/svcnet/svcnet/internal/registry/validatingwebhookconfiguration"
)

// admissionregistration returns the resources of
// admissionregistration.k8s.io/v1: the webhook configurations, which the
// API server's admission reads.
func admissionregistration() []*registry.Resource {
	return []*registry.Resource{
		validatingwebhookconfiguration.Resource(),
		mutatingwebhookconfiguration.Resource(),
	}
}
