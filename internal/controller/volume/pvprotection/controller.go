// Package pvprotection is upstream's PV protection controller
// (pkg/controller/volume/pvprotection): every volume carries the
// kubernetes.io/pv-protection finalizer, and a deleted volume keeps it
// (Terminating) while it is Bound to a claim.
package pvprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/registry/persistentvolume"
)

// ControllerName and Alias are upstream's names of the controller.
const (
	ControllerName = "persistentvolume-protection-controller"
	Alias          = "pv-protection"
)

// Controller adds and removes the volumes' finalizer.
type Controller struct {
	client  kubernetes.Interface
	volumes corelisters.PersistentVolumeLister
	queue   *controller.Queue[string]
	synced  cache.InformerSynced
}

// New creates the controller and registers its informer handler.
func New(d controller.Deps) (*Controller, error) {
	inf := d.Informers.Core().V1().PersistentVolumes()
	c := &Controller{client: d.Client, volumes: inf.Lister()}
	c.queue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "pvprotection", Sync: c.sync})
	changed := func(obj any) {
		if pv, ok := informer.Object[*corev1.PersistentVolume](obj); ok && needsWork(pv) {
			c.queue.Add(pv.Name)
		}
	}
	synced, err := informer.Handle(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, cur any) { changed(cur) }})
	if err != nil {
		return nil, fmt.Errorf("pv protection controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the finalizers until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.synced) }

// needsWork: a volume without the finalizer, or a deleted volume with it
// that is no longer Bound.
func needsWork(pv *corev1.PersistentVolume) bool {
	has := slices.Contains(pv.Finalizers, persistentvolume.Finalizer)
	if pv.DeletionTimestamp == nil {
		return !has
	}
	return has && pv.Status.Phase != corev1.VolumeBound
}

func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get volume %s: %w", name, err)
	}
	if !needsWork(pv) {
		return nil
	}
	clone := pv.DeepCopy()
	if pv.DeletionTimestamp == nil {
		clone.Finalizers = append(clone.Finalizers, persistentvolume.Finalizer)
	} else {
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == persistentvolume.Finalizer })
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update finalizers of volume %s: %w", name, err)
	}
	return nil
}
