package all

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/configmap"
	"github.com/svcnet/svcnet/internal/registry/endpoints"
	"github.com/svcnet/svcnet/internal/registry/event"
	"github.com/svcnet/svcnet/internal/registry/namespace"
	"github.com/svcnet/svcnet/internal/registry/node"
	"github.com/svcnet/svcnet/internal/registry/persistentvolume"
	"github.com/svcnet/svcnet/internal/registry/persistentvolumeclaim"
	"github.com/svcnet/svcnet/internal/registry/pod"
	"github.com/svcnet/svcnet/internal/registry/podtemplate"
	"github.com/svcnet/svcnet/internal/registry/replicationcontroller"
	"github.com/svcnet/svcnet/internal/registry/resourcequota"
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
		persistentvolumeclaim.Resource(storageClasses(d)),
		pod.Resource(d.ServiceAccounts, evictions(d)),
		podtemplate.Resource(),
		replicationcontroller.Resource(),
		resourcequota.Resource(),
		secret.Resource(),
		service.Resource(d.Services),
		serviceaccount.Resource(d.Tokens),
	}
}

// storageClasses reads StorageClasses through the loopback client, for the
// default class of new claims and their resizes; nil without a client.
func storageClasses(d Deps) persistentvolumeclaim.Classes {
	if d.Client == nil {
		return nil
	}
	return loopbackClasses{d.Client}
}

type loopbackClasses struct{ client kubernetes.Interface }

func (l loopbackClasses) List(ctx context.Context) ([]*storagev1.StorageClass, error) {
	list, err := l.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*storagev1.StorageClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l loopbackClasses) Get(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	return l.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
}
