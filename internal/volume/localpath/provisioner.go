// Package localpath is svcnet's built-in volume provisioner, as kind's
// and k3s's local-path-provisioner: a claim of a StorageClass whose
// provisioner it is gets a directory and a PersistentVolume (hostPath,
// DirectoryOrCreate) pre-bound to the claim, which the PersistentVolume
// controller then binds. It runs in two places:
//
//   - in each node agent, as svcnet.io/local-path (class standard,
//     WaitForFirstConsumer): it provisions the claims the scheduler selected
//     its node for (volume.kubernetes.io/selected-node), in a directory of
//     the node's data dir, and pins the volume to the node with required
//     node affinity on kubernetes.io/hostname;
//   - in the controller manager, as svcnet.io/shared-path (class shared):
//     a directory of the cluster's data dir, which every node of a
//     one-machine cluster sees, so ReadWriteMany claims work.
//
// As an external provisioner it also deletes what it made: a Released
// volume with the Delete policy loses its directory, then the volume; and
// it plays the external resizer for them: a bound claim of a class with
// allowVolumeExpansion that asks for more gets it (a directory has no size
// to grow), in the volume's capacity and the claim's status.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
)

// The provisioners' names (StorageClass.provisioner).
const (
	LocalProvisioner  = "svcnet.io/local-path"
	SharedProvisioner = "svcnet.io/shared-path"
)

// Config configures one provisioner.
type Config struct {
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	Metrics   *controller.Metrics
	// Provisioner is the name it answers to.
	Provisioner string
	// Dir holds the volumes' directories.
	Dir string
	// NodeName, for the node-local provisioner, is its node: it provisions
	// only the claims selected for it, and pins its volumes to it. Empty
	// for the shared one.
	NodeName string
}

// Provisioner provisions, deletes and resizes volumes.
type Provisioner struct {
	cfg      Config
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	recorder record.EventRecorder
	claimQ   *controller.Queue[string]
	volumeQ  *controller.Queue[string]
	synced   []cache.InformerSynced
}

// New creates the provisioner and registers its informer handlers.
func New(ctx context.Context, cfg Config) (*Provisioner, error) {
	core := cfg.Informers.Core().V1()
	pvcInf, pvInf := core.PersistentVolumeClaims(), core.PersistentVolumes()
	scInf := cfg.Informers.Storage().V1().StorageClasses()
	// Events come from the provisioner by name and instance, as
	// sig-storage's provisioners' ("rancher.io/local-path_<pod>").
	component := cfg.Provisioner
	if cfg.NodeName != "" {
		component += "_" + cfg.NodeName
	}
	p := &Provisioner{cfg: cfg, claims: pvcInf.Lister(), volumes: pvInf.Lister(), classes: scInf.Lister(),
		recorder: events.NewRecorder(ctx, cfg.Client, component)}
	name := strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(cfg.Provisioner)
	p.claimQ = controller.NewQueue(cfg.Metrics, controller.QueueConfig[string]{Name: name + "_claims", Sync: p.syncClaim})
	p.volumeQ = controller.NewQueue(cfg.Metrics, controller.QueueConfig[string]{Name: name + "_volumes", Sync: p.syncVolume})
	claimChanged := func(obj any) {
		if key, ok := informer.Key(obj); ok {
			p.claimQ.Add(key)
		}
	}
	volumeChanged := func(obj any) {
		if pv, ok := informer.Object[*corev1.PersistentVolume](obj); ok && p.owns(pv) {
			p.volumeQ.Add(pv.Name)
			// Its claim's resize may have waited for the volume to
			// reach this cache.
			if ref := pv.Spec.ClaimRef; ref != nil {
				p.claimQ.Add(ref.Namespace + "/" + ref.Name)
			}
		}
	}
	synced, err := informer.Register(
		informer.Handler{Informer: pvcInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: claimChanged, UpdateFunc: func(_, cur any) { claimChanged(cur) }}},
		informer.Handler{Informer: pvInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: volumeChanged, UpdateFunc: func(_, cur any) { volumeChanged(cur) }}},
		informer.Handler{Informer: scInf.Informer(), Handler: cache.ResourceEventHandlerFuncs{}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s provisioner: %w", cfg.Provisioner, err)
	}
	p.synced = synced
	return p, nil
}

// Run provisions until ctx ends.
func (p *Provisioner) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.volumeQ.Run(ctx, 1, p.synced...)
	}()
	p.claimQ.Run(ctx, 2, p.synced...)
	<-done
}

// owns: a volume this provisioner made, in its directory.
func (p *Provisioner) owns(pv *corev1.PersistentVolume) bool {
	return pv.Annotations[storagehelpers.AnnDynamicallyProvisioned] == p.cfg.Provisioner &&
		pv.Spec.HostPath != nil && strings.HasPrefix(pv.Spec.HostPath.Path, p.cfg.Dir+string(filepath.Separator))
}

// volumeName is the volume of a claim, named as sig-storage's provisioners
// name theirs.
func volumeName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

func (p *Provisioner) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("bad key %q: %w", key, err)
	}
	claim, err := p.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	if claim.Spec.VolumeName != "" {
		return p.resize(ctx, claim)
	}
	if !p.shouldProvision(claim) {
		return nil
	}
	class, err := p.classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil || class.Provisioner != p.cfg.Provisioner {
		return nil // the PersistentVolume controller reports a missing class
	}
	return p.provision(ctx, claim, class)
}

// shouldProvision: an unbound claim, not being deleted, handed to this
// provisioner by the PersistentVolume controller, selected for this node
// when the provisioner is a node's, and without a volume yet.
func (p *Provisioner) shouldProvision(claim *corev1.PersistentVolumeClaim) bool {
	if claim.DeletionTimestamp != nil {
		return false
	}
	if claim.Annotations[storagehelpers.AnnStorageProvisioner] != p.cfg.Provisioner &&
		claim.Annotations[storagehelpers.AnnBetaStorageProvisioner] != p.cfg.Provisioner {
		return false
	}
	if p.cfg.NodeName != "" && claim.Annotations[storagehelpers.AnnSelectedNode] != p.cfg.NodeName {
		return false
	}
	_, err := p.volumes.Get(volumeName(claim))
	return apierrors.IsNotFound(err)
}

// provision makes the claim's directory and its volume.
func (p *Provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	p.recorder.Eventf(claim, corev1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume for claim %q", claim.Namespace+"/"+claim.Name)
	pv, err := p.volumeFor(claim, class)
	if err == nil {
		err = os.MkdirAll(pv.Spec.HostPath.Path, 0o777)
		if err == nil {
			// As local-path-provisioner's, any container user may write.
			err = os.Chmod(pv.Spec.HostPath.Path, 0o777)
		}
	}
	if err != nil {
		p.recorder.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", class.Name, err)
		return fmt.Errorf("provision claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	_, err = p.cfg.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // provisioned by an earlier sync the cache had not seen
	}
	if err != nil {
		p.recorder.Eventf(claim, corev1.EventTypeWarning, "ProvisioningFailed", "failed to provision volume with StorageClass %q: %v", class.Name, err)
		return fmt.Errorf("create volume for claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	p.recorder.Eventf(claim, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume %s", pv.Name)
	return nil
}

// volumeFor is the volume of a claim: its request, access modes and
// mode, the class's reclaim policy and mount options, a directory named
// as local-path-provisioner's (<volume>_<namespace>_<claim>), and for a
// node's volume the affinity to the node.
func (p *Provisioner) volumeFor(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (*corev1.PersistentVolume, error) {
	if p.cfg.NodeName != "" {
		for _, m := range claim.Spec.AccessModes {
			if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
				return nil, errors.New("NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")
			}
		}
	}
	if mode := claim.Spec.VolumeMode; mode != nil && *mode == corev1.PersistentVolumeBlock {
		return nil, errors.New("block volumes are not supported")
	}
	name := volumeName(claim)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: p.cfg.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    claim.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(p.cfg.Dir, name+"_"+claim.Namespace+"_"+claim.Name),
				Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
		},
	}
	if p.cfg.NodeName != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{p.cfg.NodeName}}},
		}}}}
	}
	return pv, nil
}

// syncVolume deletes a released volume of the Delete policy: its
// directory, then the volume.
func (p *Provisioner) syncVolume(ctx context.Context, name string) error {
	pv, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get volume %s: %w", name, err)
	}
	if !p.owns(pv) || pv.DeletionTimestamp != nil || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return nil
	}
	if err := os.RemoveAll(pv.Spec.HostPath.Path); err != nil {
		p.recorder.Event(pv, corev1.EventTypeWarning, "VolumeFailedDelete", err.Error())
		return fmt.Errorf("remove the directory of volume %s: %w", name, err)
	}
	slog.Info("deleted volume", "provisioner", p.cfg.Provisioner, "volume", name, "path", pv.Spec.HostPath.Path)
	err = p.cfg.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	return nil
}

// resize grows the volume of a bound claim that asks for more, when its
// class allows expansion (the API server refuses the request otherwise),
// and records the new size in the claim's status, as the external resizer
// and the kubelet do together for a volume that needs no file system
// resize.
func (p *Provisioner) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Status.Phase != corev1.ClaimBound {
		return nil
	}
	pv, err := p.volumes.Get(claim.Spec.VolumeName)
	if err != nil || !p.owns(pv) {
		return nil
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		class, err := p.classes.Get(pv.Spec.StorageClassName)
		if err != nil || !ptr.Deref(class.AllowVolumeExpansion, false) {
			return nil
		}
		p.recorder.Eventf(claim, corev1.EventTypeNormal, "Resizing", "External resizer is resizing volume %s", pv.Name)
		pv = pv.DeepCopy()
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		if pv, err = p.cfg.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("resize volume %s: %w", claim.Spec.VolumeName, err)
		}
	}
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	if status, ok := claim.Status.Capacity[corev1.ResourceStorage]; ok && status.Cmp(capacity) >= 0 {
		return nil
	}
	clone := claim.DeepCopy()
	clone.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
	clone.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: capacity}
	clone.Status.Conditions = slices.DeleteFunc(clone.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == corev1.PersistentVolumeClaimResizing || c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
	})
	if _, err := p.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("record the size of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	p.recorder.Event(claim, corev1.EventTypeNormal, "VolumeResizeSuccessful", "Resize volume succeeded")
	return nil
}
