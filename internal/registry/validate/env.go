package validate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Downward API fields an env var may read, and the container resources a
// resourceFieldRef may name (sorted, as upstream lists them).
var (
	envFieldPaths = []string{
		"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
	}
	volumeFieldPaths = []string{
		"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
	}
	resourceFieldPaths = []string{
		"limits.cpu", "limits.ephemeral-storage", "limits.memory",
		"requests.cpu", "requests.ephemeral-storage", "requests.memory",
	}
	// podFieldLabels are the pod fields the v1 downward API converts.
	podFieldLabels = map[string]bool{
		"metadata.annotations": true, "metadata.labels": true, "metadata.name": true,
		"metadata.namespace": true, "metadata.uid": true, "spec.nodeName": true,
		"spec.restartPolicy": true, "spec.serviceAccountName": true, "spec.schedulerName": true,
		"status.phase": true, "status.hostIP": true, "status.hostIPs": true,
		"status.podIP": true, "status.podIPs": true,
	}
)

// Env checks a container's environment variables. Names follow the relaxed
// rule (printable ASCII except '='), the default since 1.32.
func Env(vars []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		p := path.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, Invalid(p.Child("name"), ev.Name, validation.IsRelaxedEnvVarName(ev.Name))...)
		}
		errs = append(errs, envValueFrom(ev, p.Child("valueFrom"))...)
	}
	return errs
}

func envValueFrom(ev corev1.EnvVar, path *field.Path) field.ErrorList {
	from := ev.ValueFrom
	if from == nil {
		return nil
	}
	var errs field.ErrorList
	sources := 0
	if from.FieldRef != nil {
		sources++
		errs = append(errs, fieldSelector(from.FieldRef, envFieldPaths, path.Child("fieldRef"))...)
	}
	if from.ResourceFieldRef != nil {
		sources++
		errs = append(errs, resourceFieldSelector(from.ResourceFieldRef, false, path.Child("resourceFieldRef"))...)
	}
	if ref := from.ConfigMapKeyRef; ref != nil {
		sources++
		errs = append(errs, keySelector(ref.Name, ref.Key, path.Child("configMapKeyRef"))...)
	}
	if ref := from.SecretKeyRef; ref != nil {
		sources++
		errs = append(errs, keySelector(ref.Name, ref.Key, path.Child("secretKeyRef"))...)
	}
	switch {
	case sources == 0:
		errs = append(errs, field.Invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(path, "", "may not be specified when `value` is not empty"))
	case sources > 1:
		errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
	}
	return errs
}

func keySelector(name, key string, path *field.Path) field.ErrorList {
	errs := Name(apivalidation.NameIsDNSSubdomain, name, path.Child("name"))
	if key == "" {
		return append(errs, field.Required(path.Child("key"), ""))
	}
	return append(errs, Invalid(path.Child("key"), key, validation.IsConfigMapKey(key))...)
}

// fieldSelector checks a downward API fieldRef against the allowed paths.
func fieldSelector(fs *corev1.ObjectFieldSelector, allowed []string, path *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(path.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(path.Child("fieldPath"), "")}
	}
	base, subscript, subscripted := splitSubscript(fs.FieldPath)
	if fs.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(path.Child("fieldPath"), fs.FieldPath,
			fmt.Sprintf("error converting fieldPath: unsupported pod version: %s", fs.APIVersion))}
	}
	if subscripted && base != "metadata.annotations" && base != "metadata.labels" {
		return field.ErrorList{field.Invalid(path.Child("fieldPath"), fs.FieldPath,
			fmt.Sprintf("error converting fieldPath: field label does not support subscript: %s", fs.FieldPath))}
	}
	if base == "spec.host" { // what old v1 clients call spec.nodeName
		base = "spec.nodeName"
	}
	if !podFieldLabels[base] {
		return field.ErrorList{field.Invalid(path.Child("fieldPath"), fs.FieldPath,
			fmt.Sprintf("error converting fieldPath: field label not supported: %s", fs.FieldPath))}
	}
	switch {
	case subscripted && base == "metadata.annotations":
		return QualifiedName(strings.ToLower(subscript), path)
	case subscripted:
		return QualifiedName(subscript, path)
	case !slices.Contains(allowed, base):
		return field.ErrorList{field.NotSupported(path.Child("fieldPath"), base, allowed)}
	}
	return nil
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(fieldPath string) (base, subscript string, ok bool) {
	open := strings.Index(fieldPath, "['")
	if open < 0 || !strings.HasSuffix(fieldPath, "']") || open+2 > len(fieldPath)-2 {
		return fieldPath, "", false
	}
	return fieldPath[:open], fieldPath[open+2 : len(fieldPath)-2], true
}

// resourceFieldSelector checks a downward API resourceFieldRef; volume files
// must name their container.
func resourceFieldSelector(fs *corev1.ResourceFieldSelector, volume bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		errs = append(errs, field.Required(path.Child("containerName"), ""))
	case fs.Resource == "":
		errs = append(errs, field.Required(path.Child("resource"), ""))
	case !slices.Contains(resourceFieldPaths, fs.Resource) &&
		!strings.HasPrefix(fs.Resource, "requests.hugepages-") && !strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		errs = append(errs, field.NotSupported(path.Child("resource"), fs.Resource, resourceFieldPaths))
	}
	return append(errs, divisor(fs.Resource, fs.Divisor, path)...)
}

func divisor(name string, d resource.Quantity, path *field.Path) field.ErrorList {
	if d.Cmp(resource.Quantity{}) == 0 {
		return nil
	}
	byteUnits := []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
	const byteList = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
	var msg string
	switch {
	case name == "limits.cpu" || name == "requests.cpu":
		if !slices.Contains([]string{"1m", "1"}, d.String()) {
			msg = "only divisor's values 1m and 1 are supported with the cpu resource"
		}
	case name == "limits.memory" || name == "requests.memory":
		if !slices.Contains(byteUnits, d.String()) {
			msg = "only divisor's values " + byteList + " are supported with the memory resource"
		}
	case name == "limits.ephemeral-storage" || name == "requests.ephemeral-storage":
		if !slices.Contains(byteUnits, d.String()) {
			msg = "only divisor's values " + byteList + " are supported with the local ephemeral storage resource"
		}
	case strings.HasPrefix(name, "requests.hugepages-") || strings.HasPrefix(name, "limits.hugepages-"):
		if !slices.Contains(byteUnits, d.String()) {
			msg = "only divisor's values " + byteList + " are supported with the hugepages resource"
		}
	}
	if msg == "" {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("divisor"), name, msg)}
}

// EnvFrom checks a container's envFrom sources.
func EnvFrom(sources []corev1.EnvFromSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range sources {
		p := path.Index(i)
		if ev.Prefix != "" {
			errs = append(errs, Invalid(p.Child("prefix"), ev.Prefix, validation.IsRelaxedEnvVarName(ev.Prefix))...)
		}
		n := 0
		if ev.ConfigMapRef != nil {
			n++
			errs = append(errs, envSourceName(ev.ConfigMapRef.Name, p.Child("configMapRef"))...)
		}
		if ev.SecretRef != nil {
			n++
			errs = append(errs, envSourceName(ev.SecretRef.Name, p.Child("secretRef"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func envSourceName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path.Child("name"), "")}
	}
	return Invalid(path.Child("name"), name, apivalidation.NameIsDNSSubdomain(name, true))
}
