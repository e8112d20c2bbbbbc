// Package persistentvolume is upstream's PersistentVolume controller
// (kube-controller-manager's persistentvolume-binder,
// pkg/controller/volume/persistentvolume): it binds claims to volumes
// (class, access modes, the smallest that fits, label selector, volumeName
// and claimRef pre-binding), keeps the phases of both (Available, Bound,
// Released, Failed; Pending and Lost for claims), gives classless claims
// the default StorageClass once there is one, hands claims of a class to
// that class's provisioner (every provisioner is an external one here: the
// claim is annotated volume.kubernetes.io/storage-provisioner) or leaves a
// WaitForFirstConsumer claim to the scheduler, and reclaims the volume of
// a deleted claim (Retain keeps it Released, Delete deletes it once its
// provisioner, or the hostPath deleter for /tmp, removed the data).
//
// Its events are upstream's, from "persistentvolume-controller".
package persistentvolume

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// ControllerName is upstream's name of the controller, Alias its older
// one (--controllers accepts both).
const (
	ControllerName = "persistentvolume-binder-controller"
	Alias          = "persistentvolume-binder"
	// eventComponent is the source of the controller's events.
	eventComponent = "persistentvolume-controller"
)

// SyncPeriod is upstream's --pvclaimbinder-sync-period: every claim and
// volume is synced again this often, which retries what waits on other
// objects (a volume that appears, a class that gets created).
const SyncPeriod = 15 * time.Second

// Controller binds claims to volumes and reclaims released volumes.
type Controller struct {
	client   kubernetes.Interface
	volumes  corelisters.PersistentVolumeLister
	claims   corelisters.PersistentVolumeClaimLister
	classes  storagelisters.StorageClassLister
	pods     corelisters.PodLister
	recorder record.EventRecorder
	// deleteHostPath removes the data of a released hostPath volume with
	// the Delete policy (upstream's hostPath deleter).
	deleteHostPath func(path string) error

	volumeQueue *controller.Queue[string]
	claimQueue  *controller.Queue[string]
	synced      []cache.InformerSynced
}

// New creates the controller and registers its informer handlers.
func New(ctx context.Context, d controller.Deps) (*Controller, error) {
	core := d.Informers.Core().V1()
	pvInf, pvcInf, podInf := core.PersistentVolumes(), core.PersistentVolumeClaims(), core.Pods()
	scInf := d.Informers.Storage().V1().StorageClasses()
	c := &Controller{
		client:         d.Client,
		volumes:        pvInf.Lister(),
		claims:         pvcInf.Lister(),
		classes:        scInf.Lister(),
		pods:           podInf.Lister(),
		recorder:       events.NewRecorder(ctx, d.Client, eventComponent),
		deleteHostPath: removeTmpHostPath,
	}
	c.volumeQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "volumes", Sync: c.syncVolumeKey})
	c.claimQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[string]{Name: "claims", Sync: c.syncClaimKey})
	enqueueVolume := func(obj any) {
		pv, ok := informer.Object[*corev1.PersistentVolume](obj)
		if !ok {
			return
		}
		c.volumeQueue.Add(pv.Name)
		if pv.Spec.ClaimRef != nil {
			c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
		} else if pv.Status.Phase == corev1.VolumeAvailable {
			c.enqueuePendingClaims(storagehelpers.GetPersistentVolumeClass(pv))
		}
	}
	enqueueClaim := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			c.claimQueue.Add(key)
		}
		if pvc, ok := informer.Object[*corev1.PersistentVolumeClaim](obj); ok && pvc.Spec.VolumeName != "" {
			c.volumeQueue.Add(pvc.Spec.VolumeName)
		}
	}
	enqueueClass := func(obj any) {
		if sc, ok := informer.Object[*storagev1.StorageClass](obj); ok {
			c.enqueuePendingClaims(sc.Name)
		}
		// A new default class is assigned to classless claims.
		c.enqueuePendingClaims("")
	}
	synced, err := informer.Register(
		informer.Handler{Informer: pvInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueVolume, UpdateFunc: func(_, cur any) { enqueueVolume(cur) }, DeleteFunc: enqueueVolume}},
		informer.Handler{Informer: pvcInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueClaim, UpdateFunc: func(_, cur any) { enqueueClaim(cur) }, DeleteFunc: enqueueClaim}},
		informer.Handler{Informer: scInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: enqueueClass, UpdateFunc: func(_, cur any) { enqueueClass(cur) }}},
		informer.Handler{Informer: podInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err != nil {
		return nil, fmt.Errorf("persistentvolume controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run syncs volumes and claims until ctx ends, all of them again every
// SyncPeriod.
func (c *Controller) Run(ctx context.Context) {
	done := make(chan struct{}, 2)
	go func() { c.volumeQueue.Run(ctx, 1, c.synced...); done <- struct{}{} }()
	go func() { c.claimQueue.Run(ctx, 1, c.synced...); done <- struct{}{} }()
	if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t := time.NewTicker(SyncPeriod)
		for loop := true; loop; {
			select {
			case <-ctx.Done():
				loop = false
			case <-t.C:
				c.resync()
			}
		}
		t.Stop()
	}
	<-done
	<-done
}

// resync queues every volume and claim, as upstream's periodic resync.
func (c *Controller) resync() {
	pvs, _ := c.volumes.List(labels.Everything())
	for _, pv := range pvs {
		c.volumeQueue.Add(pv.Name)
	}
	pvcs, _ := c.claims.List(labels.Everything())
	for _, pvc := range pvcs {
		if key, ok := informer.Key(pvc); ok {
			c.claimQueue.Add(key)
		}
	}
}

// enqueuePendingClaims queues the unbound claims of a class ("" for the
// claims that have none), which a new volume or class may satisfy.
func (c *Controller) enqueuePendingClaims(class string) {
	pvcs, _ := c.claims.List(labels.Everything())
	for _, pvc := range pvcs {
		if pvc.Spec.VolumeName != "" || storagehelpers.GetPersistentVolumeClaimClass(pvc) != class {
			continue
		}
		if key, ok := informer.Key(pvc); ok {
			c.claimQueue.Add(key)
		}
	}
}

func (c *Controller) syncClaimKey(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	return c.syncClaim(ctx, claim.DeepCopy())
}

func (c *Controller) syncVolumeKey(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get volume %s: %w", name, err)
	}
	return c.syncVolume(ctx, pv.DeepCopy())
}
