package all

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/configmap"
	"github.com/svcnet/svcnet/internal/registry/endpoints"
	"github.com/svcnet/svcnet/internal/registry/event"
	"github.com/svcnet/svcnet/internal/registry/namespace"
	"github.com/svcnet/svcnet/internal/registry/node"
	"github.com/svcnet/svcnet/internal/registry/persistentvolume"
	"github.com/svcnet/svcnet/internal/registry/persistentvolumeclaim"
	"github.com/svcnet/svcnet/internal/registry/pod"
	"github.com/svcnet/svcnet/internal/registry/secret"
	"github.com/svcnet/svcnet/internal/registry/service"
	"github.com/svcnet/svcnet/internal/registry/serviceaccount"
	"github.com/svcnet/svcnet/internal/registry/validate"
	"github.com/svcnet/svcnet/internal/registry/workload"
)

// The workload kinds default and validate their pod templates with the
// same rules as pods.
func init() {
	workload.PodTemplateDefaults = func(t *corev1.PodTemplateSpec) { validate.DefaultPodSpec(&t.Spec) }
	workload.ValidatePodTemplate = validate.PodTemplateSpec
}

// core returns the served resources of the core group (/api/v1).
func core(d Deps) []*registry.Resource {
	return []*registry.Resource{
		configmap.Resource(),
		endpoints.Resource(),
		event.Resource(),
		namespace.Resource(),
		node.Resource(),
		persistentvolume.Resource(),
		persistentvolumeclaim.Resource(),
		pod.Resource(d.ServiceAccounts, evictions(d)),
		secret.Resource(),
		service.Resource(d.Services),
		serviceaccount.Resource(d.Tokens),
	}
}
