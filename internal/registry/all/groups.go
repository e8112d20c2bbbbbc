package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/controllerrevision"
	"github.com/svcnet/svcnet/internal/registry/daemonset"
	"github.com/svcnet/svcnet/internal/registry/deployment"
	"github.com/svcnet/svcnet/internal/registry/endpointslice"
	"github.com/svcnet/svcnet/internal/registry/horizontalpodautoscaler"
	"github.com/svcnet/svcnet/internal/registry/ingress"
	"github.com/svcnet/svcnet/internal/registry/ingressclass"
	"github.com/svcnet/svcnet/internal/registry/ipaddress"
	"github.com/svcnet/svcnet/internal/registry/lease"
	"github.com/svcnet/svcnet/internal/registry/poddisruptionbudget"
	"github.com/svcnet/svcnet/internal/registry/replicaset"
	"github.com/svcnet/svcnet/internal/registry/servicecidr"
	"github.com/svcnet/svcnet/internal/registry/statefulset"
	"github.com/svcnet/svcnet/internal/registry/storageclass"
)

// groups returns the served resources of the named API groups: apps,
// autoscaling, discovery.k8s.io, networking.k8s.io, storage.k8s.io,
// coordination.k8s.io and policy.
func groups() []*registry.Resource {
	return []*registry.Resource{
		deployment.Resource(),
		replicaset.Resource(),
		statefulset.Resource(),
		daemonset.Resource(),
		controllerrevision.Resource(),
		horizontalpodautoscaler.Resource(),
		horizontalpodautoscaler.ResourceV1(),
		endpointslice.Resource(),
		ingress.Resource(),
		ingressclass.Resource(),
		servicecidr.Resource(),
		ipaddress.Resource(),
		storageclass.Resource(),
		lease.Resource(),
		poddisruptionbudget.Resource(),
	}
}
