package validate

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/internal/certificates"
)

const fileModeMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// localDescendingPath requires a relative path without "..".
func localDescendingPath(target string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	return append(errs, NoBacksteps(target, p)...)
}

// NoBacksteps rejects a path with a ".." element.
func NoBacksteps(target string, p *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(target), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
		}
	}
	return nil
}

// localNonReservedPath is a local descending path that also does not start
// with "..", the prefix the kubelet uses for its own files.
func localNonReservedPath(target string, p *field.Path) field.ErrorList {
	errs := localDescendingPath(target, p)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		errs = append(errs, field.Invalid(p, target, "must not start with '..'"))
	}
	return errs
}

func fileMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(p, *mode, fileModeMsg)}
	}
	return nil
}

// Source is one of the mutually exclusive members of a volume source.
type Source struct {
	Name  string // JSON name; the member is checked at this child path
	Set   bool
	Check func(p *field.Path) field.ErrorList // nil: only counted
	// Alias, when set, is the name upstream gives the member in its "more
	// than 1 volume type" error (it misspells one).
	Alias string
	// Unchecked members never conflict with an earlier one (upstream's
	// persistent volume flexVolume).
	Unchecked bool
}

// OneSource checks that exactly one source is set and validates the first
// one set, reporting later ones as upstream does.
func OneSource(sources []Source, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, s := range sources {
		if !s.Set {
			continue
		}
		if n > 0 && !s.Unchecked {
			name := s.Name
			if s.Alias != "" {
				name = s.Alias
			}
			errs = append(errs, field.Forbidden(p.Child(name), "may not specify more than 1 volume type"))
			continue
		}
		n++
		if s.Check != nil {
			errs = append(errs, s.Check(p.Child(s.Name))...)
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a volume type"))
	}
	return errs
}

// Volumes checks a pod's volumes and returns the valid ones by name, for the
// volume mounts to refer to. podName is empty for templates.
func Volumes(volumes []corev1.Volume, podName string, p *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	valid := map[string]corev1.VolumeSource{}
	seen := map[string]bool{}
	for i, vol := range volumes {
		vp := p.Index(i)
		namePath := vp.Child("name")
		el := volumeSource(&vol.VolumeSource, vp, vol.Name, podName)
		if vol.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, DNSLabel(vol.Name, namePath)...)
		}
		if seen[vol.Name] {
			el = append(el, field.Duplicate(namePath, vol.Name))
		}
		if len(el) == 0 {
			seen[vol.Name] = true
			valid[vol.Name] = vol.VolumeSource
		} else {
			errs = append(errs, el...)
		}
	}
	return valid, errs
}

// volumeSource checks the source of a pod volume, in upstream's order.
func volumeSource(src *corev1.VolumeSource, p *field.Path, volName, podName string) field.ErrorList {
	return OneSource([]Source{
		{Name: "emptyDir", Set: src.EmptyDir != nil, Check: func(p *field.Path) field.ErrorList {
			if l := src.EmptyDir.SizeLimit; l != nil && l.Cmp(resource.Quantity{}) < 0 {
				return field.ErrorList{field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
			}
			return nil
		}},
		{Name: "hostPath", Set: src.HostPath != nil, Check: func(p *field.Path) field.ErrorList { return HostPath(src.HostPath, p) }},
		{Name: "gitRepo", Set: src.GitRepo != nil, Check: func(p *field.Path) field.ErrorList {
			var errs field.ErrorList
			if src.GitRepo.Repository == "" {
				errs = append(errs, field.Required(p.Child("repository"), ""))
			}
			return append(errs, localDescendingPath(src.GitRepo.Directory, p.Child("directory"))...)
		}},
		{Name: "gcePersistentDisk", Set: src.GCEPersistentDisk != nil},
		{Name: "awsElasticBlockStore", Set: src.AWSElasticBlockStore != nil},
		{Name: "secret", Set: src.Secret != nil, Check: func(p *field.Path) field.ErrorList {
			return keyedVolume(src.Secret.SecretName, "secretName", src.Secret.DefaultMode, src.Secret.Items, p)
		}},
		{Name: "nfs", Set: src.NFS != nil, Check: func(p *field.Path) field.ErrorList { return NFS(src.NFS, p) }},
		{Name: "iscsi", Set: src.ISCSI != nil},
		{Name: "glusterfs", Set: src.Glusterfs != nil},
		{Name: "flocker", Set: src.Flocker != nil},
		{Name: "persistentVolumeClaim", Set: src.PersistentVolumeClaim != nil, Check: func(p *field.Path) field.ErrorList {
			if src.PersistentVolumeClaim.ClaimName == "" {
				return field.ErrorList{field.Required(p.Child("claimName"), "")}
			}
			return nil
		}},
		{Name: "rbd", Set: src.RBD != nil},
		{Name: "cinder", Set: src.Cinder != nil},
		{Name: "cephFS", Set: src.CephFS != nil},
		{Name: "quobyte", Set: src.Quobyte != nil},
		{Name: "downwardAPI", Alias: "downwarAPI", Set: src.DownwardAPI != nil, Check: func(p *field.Path) field.ErrorList {
			// as upstream, the files are reported without their index
			errs := fileMode(src.DownwardAPI.DefaultMode, p.Child("defaultMode"))
			for _, file := range src.DownwardAPI.Items {
				errs = append(errs, downwardAPIFile(&file, p)...)
			}
			return errs
		}},
		{Name: "fc", Set: src.FC != nil},
		{Name: "flexVolume", Set: src.FlexVolume != nil},
		{Name: "configMap", Set: src.ConfigMap != nil, Check: func(p *field.Path) field.ErrorList {
			return keyedVolume(src.ConfigMap.Name, "name", src.ConfigMap.DefaultMode, src.ConfigMap.Items, p)
		}},
		{Name: "azureFile", Set: src.AzureFile != nil},
		{Name: "vsphereVolume", Set: src.VsphereVolume != nil},
		{Name: "photonPersistentDisk", Set: src.PhotonPersistentDisk != nil},
		{Name: "portworxVolume", Set: src.PortworxVolume != nil},
		{Name: "azureDisk", Set: src.AzureDisk != nil},
		{Name: "storageos", Set: src.StorageOS != nil},
		{Name: "projected", Set: src.Projected != nil, Check: func(p *field.Path) field.ErrorList { return projected(src.Projected, p) }},
		{Name: "scaleIO", Set: src.ScaleIO != nil},
		{Name: "csi", Set: src.CSI != nil, Check: func(p *field.Path) field.ErrorList { return CSIDriverName(src.CSI.Driver, p.Child("driver")) }},
		{Name: "ephemeral", Set: src.Ephemeral != nil, Check: func(ep *field.Path) field.ErrorList {
			return ephemeral(src.Ephemeral, volName, podName, ep, p.Child("name"))
		}},
		{Name: "image", Set: src.Image != nil, Check: func(p *field.Path) field.ErrorList {
			if podName != "" && src.Image.Reference == "" {
				return field.ErrorList{field.Required(p.Child("reference"), "")}
			}
			return nil
		}},
	}, p)
}

var hostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathBlockDev, corev1.HostPathCharDev, corev1.HostPathDirectory,
	corev1.HostPathDirectoryOrCreate, corev1.HostPathFile, corev1.HostPathFileOrCreate, corev1.HostPathSocket,
}

// HostPath checks a hostPath source (pods and persistent volumes).
func HostPath(src *corev1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	if src.Path == "" {
		return field.ErrorList{field.Required(p.Child("path"), "")}
	}
	errs := NoBacksteps(src.Path, p.Child("path"))
	if t := src.Type; t != nil {
		known := false
		for _, h := range hostPathTypes {
			known = known || h == *t
		}
		if !known {
			errs = append(errs, field.NotSupported(p.Child("type"), t, hostPathTypes))
		}
	}
	return errs
}

// NFS checks an NFS source (pods and persistent volumes).
func NFS(src *corev1.NFSVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Server == "" {
		errs = append(errs, field.Required(p.Child("server"), ""))
	}
	if src.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	if !path.IsAbs(src.Path) {
		errs = append(errs, field.Invalid(p.Child("path"), src.Path, "must be an absolute path"))
	}
	return errs
}

// CSIDriverName checks the name of a CSI driver; a missing one is only
// required, as upstream's ValidateCSIDriverName.
func CSIDriverName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(p, "", 63))
	}
	return append(errs, Invalid(p, name, apivalidation.NameIsDNSSubdomain(strings.ToLower(name), false))...)
}

// keyedVolume checks a secret or config map volume: the object it names in
// the field nameField, its default file mode and the keys it projects.
func keyedVolume(name, nameField string, defaultMode *int32, items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child(nameField), ""))
	}
	errs = append(errs, fileMode(defaultMode, p.Child("defaultMode"))...)
	return append(errs, keysToPaths(items, p.Child("items"))...)
}

func keysToPaths(items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		ip := p.Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		if kp.Path == "" {
			errs = append(errs, field.Required(ip.Child("path"), ""))
		}
		errs = append(errs, localNonReservedPath(kp.Path, ip.Child("path"))...)
		errs = append(errs, fileMode(kp.Mode, ip.Child("mode"))...)
	}
	return errs
}

func downwardAPIFile(file *corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if file.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(file.Path, p.Child("path"))...)
	switch {
	case file.FieldRef != nil:
		errs = append(errs, fieldSelector(file.FieldRef, volumeFieldPaths, p.Child("fieldRef"))...)
		if file.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case file.ResourceFieldRef != nil:
		errs = append(errs, resourceFieldSelector(file.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, fileMode(file.Mode, p.Child("mode"))...)
}

// projected checks a projected volume: each source sets one member and no
// two sources write the same path.
func projected(src *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	errs := fileMode(src.DefaultMode, p.Child("defaultMode"))
	paths := map[string]bool{}
	claim := func(target, name string) {
		if target == "" {
			return
		}
		if paths[target] {
			errs = append(errs, field.Invalid(p, name, "conflicting duplicate paths"))
		}
		paths[target] = true
	}
	// keyed checks a secret or config map source: the object it names and
	// the keys it projects.
	keyed := func(name string, items []corev1.KeyToPath, srcPath *field.Path) {
		if name == "" {
			errs = append(errs, field.Required(srcPath.Child("name"), ""))
		}
		errs = append(errs, keysToPaths(items, srcPath.Child("items"))...)
		for _, item := range items {
			claim(item.Path, name)
		}
	}
	for i, s := range src.Sources {
		sp := p.Child("sources").Index(i)
		n := 0
		if s.Secret != nil {
			n++
			keyed(s.Secret.Name, s.Secret.Items, sp.Child("secret"))
		}
		if s.ConfigMap != nil {
			n++
			keyed(s.ConfigMap.Name, s.ConfigMap.Items, sp.Child("configMap"))
		}
		if s.DownwardAPI != nil {
			n++
			for _, file := range s.DownwardAPI.Items {
				errs = append(errs, downwardAPIFile(&file, sp.Child("downwardAPI"))...)
				claim(file.Path, file.Path)
			}
		}
		if t := s.ServiceAccountToken; t != nil {
			n++
			tp := sp.Child("serviceAccountToken")
			if t.ExpirationSeconds != nil && *t.ExpirationSeconds < 10*60 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
			}
			if t.ExpirationSeconds != nil && *t.ExpirationSeconds > 1<<32 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
			}
			if t.Path == "" {
				errs = append(errs, field.Required(p.Child("path"), ""))
			} else {
				errs = append(errs, localNonReservedPath(t.Path, p.Child("path"))...)
			}
		}
		if s.ClusterTrustBundle != nil {
			n++
		}
		if s.PodCertificate != nil {
			n++
			errs = append(errs, podCertificate(s.PodCertificate, sp.Child("podCertificate"), claim)...)
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// The longest certificates a podCertificate projection may ask for: 91
// days, and a day of a Kubernetes signer, as upstream's certificates API.
const (
	maxPodCertificateSeconds           = 91 * 24 * 60 * 60
	maxKubernetesPodCertificateSeconds = 24 * 60 * 60
)

// podCertificateKeyTypes are the keys a kubelet generates for a pod
// certificate.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// podCertificate checks a podCertificate projection: its signer, key
// type, user annotations and user, the life it asks for, and the paths
// it writes (claimed, as every source's).
func podCertificate(pc *corev1.PodCertificateProjection, p *field.Path, claim func(target, name string)) field.ErrorList {
	errs := certificates.ValidateSignerName(p.Child("signerName"), pc.SignerName)
	errs = append(errs, certificates.ValidateUserAnnotations(pc.UserAnnotations, p.Child("userAnnotations"))...)
	if pc.User != nil {
		for _, msg := range validation.IsValidUserID(*pc.User) {
			errs = append(errs, field.Invalid(p.Child("user"), *pc.User, msg))
		}
	}
	if !slices.Contains(podCertificateKeyTypes, pc.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), pc.KeyType, podCertificateKeyTypes))
	}
	if m := pc.MaxExpirationSeconds; m != nil {
		if *m < 3600 {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, "if provided, maxExpirationSeconds must be >= 3600"))
		}
		most := maxPodCertificateSeconds
		if certificates.IsKubernetesSigner(pc.SignerName) {
			most = maxKubernetesPodCertificateSeconds
		}
		if *m > int32(most) {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", most)))
		}
	}
	paths := 0
	for _, f := range []struct{ name, path string }{
		{"credentialBundlePath", pc.CredentialBundlePath}, {"keyPath", pc.KeyPath}, {"certificateChainPath", pc.CertificateChainPath},
	} {
		if f.path == "" {
			continue
		}
		paths++
		errs = append(errs, localNonReservedPath(f.path, p.Child(f.name))...)
		claim(f.path, f.path)
	}
	if paths == 0 {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}

// ephemeral checks a generic ephemeral volume, whose claim is named after
// the pod and the volume.
func ephemeral(src *corev1.EphemeralVolumeSource, volName, podName string, p, namePath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.VolumeClaimTemplate == nil {
		errs = append(errs, field.Required(p.Child("volumeClaimTemplate"), ""))
	} else {
		tp := p.Child("volumeClaimTemplate")
		errs = append(errs, templateMeta(&src.VolumeClaimTemplate.ObjectMeta, tp.Child("metadata"))...)
		errs = append(errs, PersistentVolumeClaimSpec(&src.VolumeClaimTemplate.Spec, tp.Child("spec"))...)
	}
	if podName != "" && volName != "" {
		claim := podName + "-" + volName
		for _, msg := range apivalidation.NameIsDNSSubdomain(claim, false) {
			errs = append(errs, field.Invalid(namePath, volName, "PVC name \""+claim+"\": "+msg))
		}
	}
	return errs
}
