// Package persistentvolume is the PersistentVolume strategy: a new volume
// is Pending with the Retain policy and Filesystem mode, its spec is
// validated as upstream (one volume source, storage capacity, access
// modes), it gets the pv-protection finalizer, its source cannot change, and `kubectl get pv` shows capacity,
// access modes, claim and class.
package persistentvolume

import (
	"context"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

var reclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{
	corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain,
}

// Resource describes persistent volumes.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:                corev1.SchemeGroupVersion.WithKind("PersistentVolume"),
		Resource:            "persistentvolumes",
		Singular:            "persistentvolume",
		ShortNames:          []string{"pv"},
		Status:              true,
		ReturnDeletedObject: true,
		Strategy:            strategy{},
		Columns:             columns(),
		Fields: func(obj runtime.Object) fields.Set {
			// "name" is an upstream bug kept for compatibility.
			return fields.Set{"name": obj.(*corev1.PersistentVolume).Name}
		},
	}
}

type strategy struct{ registry.Base }

// Default is upstream's SetDefaults_PersistentVolume.
func (strategy) Default(obj runtime.Object) {
	pv := obj.(*corev1.PersistentVolume)
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		mode := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &mode
	}
	if pv.Spec.HostPath != nil {
		validate.DefaultHostPath(pv.Spec.HostPath)
	}
	validate.RoundResources(pv.Spec.Capacity)
}

// Finalizer is upstream's kubernetes.io/pv-protection, which the
// pv-protection controller removes once the volume is not Bound.
const Finalizer = "kubernetes.io/pv-protection"

// Admit is upstream's StorageObjectInUseProtection admission plugin: every
// new volume gets the kubernetes.io/pv-protection finalizer.
func (strategy) Admit(_ context.Context, obj runtime.Object) error {
	pv := obj.(*corev1.PersistentVolume)
	if !slices.Contains(pv.Finalizers, Finalizer) {
		pv.Finalizers = append(pv.Finalizers, Finalizer)
	}
	return nil
}

// PrepareForCreate starts the volume Pending and records when it got there.
func (strategy) PrepareForCreate(obj runtime.Object) {
	now := metav1.Now()
	obj.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*corev1.PersistentVolume).Spec)
}

// ValidateUpdate keeps the volume source, mode and node affinity fixed;
// only a CSI expansion secret may be added.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	pv, prev := obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume)
	errs := validateSpec(&pv.Spec)
	source := pv.Spec.PersistentVolumeSource
	if prev.Spec.CSI != nil && prev.Spec.CSI.ControllerExpandSecretRef == nil && source.CSI != nil && source.CSI.ControllerExpandSecretRef != nil {
		source = *source.DeepCopy()
		source.CSI.ControllerExpandSecretRef = nil
	}
	if !reflect.DeepEqual(source, prev.Spec.PersistentVolumeSource) {
		diff := cmp.Diff(prev.Spec.PersistentVolumeSource, source)
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"),
			fmt.Sprintf("spec.persistentvolumesource is immutable after creation\n%v", diff)))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, prev.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if prev.Spec.NodeAffinity != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.NodeAffinity, prev.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	if prev.Spec.VolumeAttributesClassName != nil && pv.Spec.VolumeAttributesClassName == nil {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "volumeAttributesClassName"), "update from non-nil value to nil is forbidden"))
	}
	return errs
}

// validateSpec follows upstream's ValidatePersistentVolumeSpec.
func validateSpec(spec *corev1.PersistentVolumeSpec) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec")
	if len(spec.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), ""))
	}
	errs = append(errs, validate.AccessModes(spec.AccessModes, p.Child("accessModes"))...)
	capacity := p.Child("capacity")
	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(capacity, ""))
	}
	if _, ok := spec.Capacity[corev1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		errs = append(errs, field.NotSupported(capacity, spec.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Capacity)) {
		q, qp := spec.Capacity[name], capacity.Key(string(name))
		if q.Value() < 0 {
			errs = append(errs, field.Invalid(qp, q.Value(), "must be a valid resource quantity"))
		}
		errs = append(errs, validate.PositiveQuantity(q, qp)...)
	}
	if policy := spec.PersistentVolumeReclaimPolicy; policy != "" {
		switch policy {
		case corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain:
		default:
			errs = append(errs, field.NotSupported(p.Child("persistentVolumeReclaimPolicy"), policy, reclaimPolicies))
		}
	}
	if na := spec.NodeAffinity; na != nil {
		if na.Required != nil {
			errs = append(errs, validate.NodeSelector(na.Required, p.Child("nodeAffinity", "required"))...)
		} else {
			errs = append(errs, field.Required(p.Child("nodeAffinity", "required"), "must specify required node constraints"))
		}
	}
	errs = append(errs, validateSource(spec, p)...)
	if spec.HostPath != nil && path.Clean(spec.HostPath.Path) == "/" && spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		errs = append(errs, field.Forbidden(p.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if spec.StorageClassName != "" {
		errs = append(errs, validate.ClassName(spec.StorageClassName, p.Child("storageClassName"))...)
	}
	errs = append(errs, validate.VolumeMode(spec.VolumeMode, p.Child("volumeMode"))...)
	if vac := spec.VolumeAttributesClassName; vac != nil {
		if *vac == "" {
			errs = append(errs, field.Required(p.Child("volumeAttributesClassName"), "an empty string is disallowed"))
		} else {
			errs = append(errs, validate.ClassName(*vac, p.Child("volumeAttributesClassName"))...)
		}
		if spec.CSI == nil {
			errs = append(errs, field.Required(p.Child("csi"), "has to be specified when using volumeAttributesClassName"))
		}
	}
	return errs
}

// validateSource checks the one volume source of a persistent volume, in
// upstream's order; the cloud sources are only counted.
func validateSource(spec *corev1.PersistentVolumeSpec, p *field.Path) field.ErrorList {
	s := &spec.PersistentVolumeSource
	return validate.OneSource([]validate.Source{
		{Name: "hostPath", Set: s.HostPath != nil, Check: func(p *field.Path) field.ErrorList { return validate.HostPath(s.HostPath, p) }},
		{Name: "gcePersistentDisk", Set: s.GCEPersistentDisk != nil},
		{Name: "awsElasticBlockStore", Set: s.AWSElasticBlockStore != nil},
		{Name: "glusterfs", Set: s.Glusterfs != nil},
		{Name: "flocker", Set: s.Flocker != nil},
		{Name: "nfs", Set: s.NFS != nil, Check: func(p *field.Path) field.ErrorList { return validate.NFS(s.NFS, p) }},
		{Name: "rbd", Set: s.RBD != nil},
		{Name: "quobyte", Set: s.Quobyte != nil},
		{Name: "cephFS", Set: s.CephFS != nil},
		{Name: "iscsi", Set: s.ISCSI != nil},
		{Name: "cinder", Set: s.Cinder != nil},
		{Name: "fc", Set: s.FC != nil},
		{Name: "flexVolume", Set: s.FlexVolume != nil, Unchecked: true},
		{Name: "azureFile", Set: s.AzureFile != nil},
		{Name: "vsphereVolume", Set: s.VsphereVolume != nil},
		{Name: "photonPersistentDisk", Set: s.PhotonPersistentDisk != nil},
		{Name: "portworxVolume", Set: s.PortworxVolume != nil},
		{Name: "azureDisk", Set: s.AzureDisk != nil},
		{Name: "scaleIO", Set: s.ScaleIO != nil},
		{Name: "local", Set: s.Local != nil, Check: func(lp *field.Path) field.ErrorList {
			var errs field.ErrorList
			if s.Local.Path == "" {
				errs = append(errs, field.Required(lp.Child("path"), ""))
			} else {
				errs = append(errs, validate.NoBacksteps(s.Local.Path, lp.Child("path"))...)
			}
			if spec.NodeAffinity == nil {
				errs = append(errs, field.Required(p.Child("nodeAffinity"), "Local volume requires node affinity"))
			}
			return errs
		}},
		{Name: "storageos", Set: s.StorageOS != nil},
		{Name: "csi", Set: s.CSI != nil, Check: func(cp *field.Path) field.ErrorList { return validateCSI(s.CSI, cp) }},
	}, p)
}

func validateCSI(csi *corev1.CSIPersistentVolumeSource, p *field.Path) field.ErrorList {
	errs := validate.CSIDriverName(csi.Driver, p.Child("driver"))
	if csi.VolumeHandle == "" {
		errs = append(errs, field.Required(p.Child("volumeHandle"), ""))
	}
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{
		{"controllerPublishSecretRef", csi.ControllerPublishSecretRef},
		{"controllerExpandSecretRef", csi.ControllerExpandSecretRef},
		{"nodePublishSecretRef", csi.NodePublishSecretRef},
		{"nodeExpandSecretRef", csi.NodeExpandSecretRef},
	} {
		if ref.ref == nil {
			continue
		}
		rp := p.Child(ref.name)
		if ref.ref.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), ""))
		} else {
			errs = append(errs, validate.DNSSubdomain(ref.ref.Name, rp.Child("name"))...)
		}
		if ref.ref.Namespace == "" {
			errs = append(errs, field.Required(rp.Child("namespace"), ""))
		} else {
			errs = append(errs, validate.DNSLabel(ref.ref.Namespace, rp.Child("namespace"))...)
		}
	}
	return errs
}

// AccessModesString is how tables show access modes: RWO, ROX, RWX and RWOP,
// in that order, each once.
func AccessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}} {
		for _, have := range modes {
			if have == m.mode {
				out = append(out, m.short)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

// PhaseOrTerminating is how tables show the phase of a volume or claim:
// Terminating once it is being deleted.
func PhaseOrTerminating(obj metav1.Object, phase string) string {
	if obj.GetDeletionTimestamp() != nil {
		return "Terminating"
	}
	return phase
}

// StorageClass is how tables show the class of a volume or claim: the
// legacy beta annotation wins over the field.
func StorageClass(obj metav1.Object, class string) string {
	if annotated, ok := obj.GetAnnotations()[corev1.BetaStorageClassAnnotation]; ok {
		return annotated
	}
	return class
}

// VolumeModeColumn is the wide VOLUMEMODE column of volumes and claims.
func VolumeModeColumn[T runtime.Object](description string, mode func(T) *corev1.PersistentVolumeMode) registry.Column {
	c := registry.TextColumn("VolumeMode", description, func(o T) string { return ModeOrUnset(mode(o)) })
	c.Priority = 1
	return c
}

// ClassOrUnset is how tables show a volume attributes class.
func ClassOrUnset(class *string) string {
	if class == nil {
		return "<unset>"
	}
	return *class
}

// ModeOrUnset is how tables show a volume mode.
func ModeOrUnset(mode *corev1.PersistentVolumeMode) string {
	if mode == nil {
		return "<unset>"
	}
	return string(*mode)
}

func columns() []registry.Column {
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	col := registry.TextColumn[*corev1.PersistentVolume]
	return []registry.Column{
		registry.NameColumn(),
		col("Capacity", spec["capacity"], func(pv *corev1.PersistentVolume) string {
			q := pv.Spec.Capacity[corev1.ResourceStorage]
			return q.String()
		}),
		col("Access Modes", spec["accessModes"], func(pv *corev1.PersistentVolume) string { return AccessModesString(pv.Spec.AccessModes) }),
		col("Reclaim Policy", spec["persistentVolumeReclaimPolicy"], func(pv *corev1.PersistentVolume) string {
			return string(pv.Spec.PersistentVolumeReclaimPolicy)
		}),
		col("Status", status["phase"], func(pv *corev1.PersistentVolume) string { return PhaseOrTerminating(pv, string(pv.Status.Phase)) }),
		col("Claim", spec["claimRef"], func(pv *corev1.PersistentVolume) string {
			if ref := pv.Spec.ClaimRef; ref != nil {
				return ref.Namespace + "/" + ref.Name
			}
			return ""
		}),
		col("StorageClass", "StorageClass of the pv", func(pv *corev1.PersistentVolume) string { return StorageClass(pv, pv.Spec.StorageClassName) }),
		col("VolumeAttributesClass", "VolumeAttributesClass of the pv", func(pv *corev1.PersistentVolume) string {
			return ClassOrUnset(pv.Spec.VolumeAttributesClassName)
		}),
		col("Reason", status["reason"], func(pv *corev1.PersistentVolume) string { return pv.Status.Reason }),
		registry.AgeColumn(),
		VolumeModeColumn(spec["volumeMode"], func(pv *corev1.PersistentVolume) *corev1.PersistentVolumeMode { return pv.Spec.VolumeMode }),
	}
}
