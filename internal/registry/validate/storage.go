package validate

import (
	"reflect"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// accessModeValues are the supported persistent volume access modes, sorted.
var accessModeValues = []corev1.PersistentVolumeAccessMode{
	corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
}

// volumeModeValues are the supported volume modes, sorted.
var volumeModeValues = []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}

// AccessModes checks the access modes of a volume or claim; ReadWriteOncePod
// excludes the others.
func AccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	oncePod, other := false, false
	for _, mode := range modes {
		switch mode {
		case corev1.ReadWriteOncePod:
			oncePod = true
		case corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce:
			other = true
		default:
			errs = append(errs, field.NotSupported(p, mode, accessModeValues))
		}
	}
	if oncePod && other {
		errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// VolumeMode checks an optional volume mode.
func VolumeMode(mode *corev1.PersistentVolumeMode, p *field.Path) field.ErrorList {
	if mode != nil && *mode != corev1.PersistentVolumeBlock && *mode != corev1.PersistentVolumeFilesystem {
		return field.ErrorList{field.NotSupported(p, *mode, volumeModeValues)}
	}
	return nil
}

// ClassName checks a storage class or volume attributes class name.
func ClassName(name string, p *field.Path) field.ErrorList {
	return Name(apivalidation.NameIsDNSSubdomain, name, p)
}

// PersistentVolumeClaimSpec checks the spec of a claim, or of the claim
// template of an ephemeral volume.
func PersistentVolumeClaimSpec(spec *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "at least 1 access mode is required"))
	}
	if spec.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(spec.Selector, metavalidation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	errs = append(errs, AccessModes(spec.AccessModes, p.Child("accessModes"))...)

	storagePath := p.Child("resources").Key(string(corev1.ResourceStorage))
	if storage, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else if e := PositiveQuantity(storage, storagePath); len(e) > 0 {
		errs = append(errs, e...)
	} else {
		errs = append(errs, ResourceQuantity(corev1.ResourceStorage, storage, storagePath)...)
	}

	if spec.StorageClassName != nil && *spec.StorageClassName != "" {
		errs = append(errs, ClassName(*spec.StorageClassName, p.Child("storageClassName"))...)
	}
	errs = append(errs, VolumeMode(spec.VolumeMode, p.Child("volumeMode"))...)

	if ds := spec.DataSource; ds != nil {
		errs = append(errs, dataSource(ds.Name, ds.Kind, ds.APIGroup, p.Child("dataSource"))...)
	}
	if ref := spec.DataSourceRef; ref != nil {
		rp := p.Child("dataSourceRef")
		errs = append(errs, dataSource(ref.Name, ref.Kind, ref.APIGroup, rp)...)
		if ref.Namespace != nil && *ref.Namespace != "" {
			errs = append(errs, Name(apivalidation.ValidateNamespaceName, *ref.Namespace, rp.Child("namespace"))...)
		}
	}
	if ref := spec.DataSourceRef; ref != nil && ref.Namespace != nil && *ref.Namespace != "" {
		if spec.DataSource != nil {
			errs = append(errs, field.Invalid(p, p.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
		}
	} else if ds := spec.DataSource; ds != nil && ref != nil {
		if !reflect.DeepEqual(ds.APIGroup, ref.APIGroup) || ds.Kind != ref.Kind || ds.Name != ref.Name {
			errs = append(errs, field.Invalid(p, p.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	if c := spec.VolumeAttributesClassName; c != nil && *c != "" {
		errs = append(errs, ClassName(*c, p.Child("volumeAttributesClassName"))...)
	}
	return errs
}

func dataSource(name, kind string, group *string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if kind == "" {
		errs = append(errs, field.Required(p.Child("kind"), ""))
	}
	apiGroup := ""
	if group != nil {
		apiGroup = *group
	}
	if apiGroup == "" && kind != "PersistentVolumeClaim" {
		errs = append(errs, field.Invalid(p, kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if apiGroup != "" {
		errs = append(errs, DNSSubdomain(apiGroup, p.Child("apiGroup"))...)
	}
	return errs
}

// templateMeta checks the metadata of an embedded template, which may only
// carry labels and annotations.
func templateMeta(meta *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(meta.Annotations, p.Child("annotations"))
	errs = append(errs, metavalidation.ValidateLabels(meta.Labels, p.Child("labels"))...)
	t, v := reflect.TypeOf(*meta), reflect.ValueOf(*meta)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "Labels" || f.Name == "Annotations" || v.Field(i).IsZero() {
			continue
		}
		r, n := utf8.DecodeRuneInString(f.Name)
		errs = append(errs, field.Forbidden(p.Child(string(unicode.ToLower(r))+f.Name[n:]), "cannot be set"))
	}
	return errs
}
