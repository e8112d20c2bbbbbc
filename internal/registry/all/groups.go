package all

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/controllerrevision"
	"github.com/svcnet/svcnet/internal/registry/csinode"
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
func groups(d Deps) []*registry.Resource {
	return []*registry.Resource{
		deployment.Resource(),
		replicaset.Resource(),
		statefulset.Resource(),
		daemonset.Resource(),
		controllerrevision.Resource(),
		horizontalpodautoscaler.Resource(),
		horizontalpodautoscaler.ResourceV1(),
		endpointslice.Resource(),
		ingress.Resource(ingressClasses(d)),
		ingressclass.Resource(),
		servicecidr.Resource(),
		ipaddress.Resource(),
		storageclass.Resource(),
		csinode.Resource(),
		lease.Resource(),
		poddisruptionbudget.Resource(),
	}
}

// ingressClasses lists IngressClasses through the loopback client, for
// the default class of new Ingresses; nil without a client.
func ingressClasses(d Deps) ingress.Classes {
	if d.Client == nil {
		return nil
	}
	return func(ctx context.Context) ([]networkingv1.IngressClass, error) {
		list, err := d.Client.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	}
}
