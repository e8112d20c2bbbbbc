package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/apiservice"
)

// apiregistration returns the resources of apiregistration.k8s.io/v1, which
// kube-apiserver's kube-aggregator serves: APIServices, one per served
// group version (kept by internal/controlplane/autoregister) and any a
// client registers.
func apiregistration() []*registry.Resource {
	return []*registry.Resource{apiservice.Resource()}
}
