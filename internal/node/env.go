package node

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// envSources are where a container's environment comes from.
type envSources struct {
	services corelisters.ServiceLister
	// configMap and secret read one object (through the API, so that a
	// ConfigMap created after the pod is seen on the next try).
	configMap func(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	secret    func(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	// allocatable is the node's, the default of resource limits.
	allocatable corev1.ResourceList
	// warn records an event on the pod.
	warn func(pod *corev1.Pod, reason, message string)
}

// masterServiceNamespace holds the services every pod sees ("kubernetes").
const masterServiceNamespace = "default"

// serviceEnv is the Service-link environment a pod in ns sees: the
// kubernetes Service always, the namespace's Services when links are on.
func (s *envSources) serviceEnv(ns string, links bool) (map[string]string, error) {
	all, err := s.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services for env vars: %w", err)
	}
	chosen := map[string]*corev1.Service{}
	for _, svc := range all {
		ip := svc.Spec.ClusterIP
		if ip == "" || ip == corev1.ClusterIPNone {
			continue
		}
		switch {
		case svc.Namespace == masterServiceNamespace && svc.Name == "kubernetes":
			if _, ok := chosen[svc.Name]; !ok {
				chosen[svc.Name] = svc
			}
		case svc.Namespace == ns && links:
			chosen[svc.Name] = svc
		}
	}
	env := map[string]string{}
	for _, svc := range chosen {
		serviceLinks(env, svc)
	}
	return env, nil
}

// serviceLinks adds a Service's variables: <SVC>_SERVICE_HOST/_PORT and
// named ports, and the Docker-link style <SVC>_PORT_<n>_<PROTO>...
func serviceLinks(env map[string]string, svc *corev1.Service) {
	if len(svc.Spec.Ports) == 0 {
		return
	}
	prefix := envName(svc.Name)
	ip := svc.Spec.ClusterIP
	env[prefix+"_SERVICE_HOST"] = ip
	env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
	for _, p := range svc.Spec.Ports {
		if p.Name != "" {
			env[prefix+"_SERVICE_PORT_"+envName(p.Name)] = strconv.Itoa(int(p.Port))
		}
	}
	for i, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))
		if i == 0 {
			env[prefix+"_PORT"] = url
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		env[pp] = url
		env[pp+"_PROTO"] = strings.ToLower(proto)
		env[pp+"_PORT"] = strconv.Itoa(int(p.Port))
		env[pp+"_ADDR"] = ip
	}
}

// envName upper-cases a name and turns '-' and '.' into '_', with a
// leading '_' before a digit.
func envName(s string) string {
	n := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(s))
	if n != "" && n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	return n
}

// containerEnv builds a container's environment as the kubelet does:
// envFrom, then env (expanding $(VAR) references and resolving sources),
// then the Service links not overridden. A missing ConfigMap, Secret or
// key that is not optional is an error (CreateContainerConfigError).
func (s *envSources) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP, hostIP string) ([]string, error) {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	svcEnv, err := s.serviceEnv(pod.Namespace, links)
	if err != nil {
		return nil, err
	}
	configMaps := map[string]*corev1.ConfigMap{}
	secrets := map[string]*corev1.Secret{}
	getCM := func(name string) (*corev1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		cm, err := s.configMap(ctx, pod.Namespace, name)
		if apierrors.IsNotFound(err) {
			// The kubelet's object cache words it in the singular.
			return nil, apierrors.NewNotFound(corev1.Resource("configmap"), name)
		}
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	getSecret := func(name string) (*corev1.Secret, error) {
		if sec, ok := secrets[name]; ok {
			return sec, nil
		}
		sec, err := s.secret(ctx, pod.Namespace, name)
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(corev1.Resource("secret"), name)
		}
		if err == nil {
			secrets[name] = sec
		}
		return sec, err
	}

	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, from := range c.EnvFrom {
		var data map[string]string
		var kind, name string
		switch {
		case from.ConfigMapRef != nil:
			kind, name = "configMap", from.ConfigMapRef.Name
			cm, err := getCM(name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, err
			}
			data = cm.Data
		case from.SecretRef != nil:
			kind, name = "secret", from.SecretRef.Name
			sec, err := getSecret(name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(from.SecretRef.Optional) {
					continue
				}
				return nil, err
			}
			data = map[string]string{}
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		var invalid []string
		for _, k := range slices.Sorted(maps.Keys(data)) {
			key := from.Prefix + k
			if len(utilvalidation.IsRelaxedEnvVarName(key)) > 0 {
				invalid = append(invalid, key)
				continue
			}
			set(key, data[k])
		}
		if len(invalid) > 0 && s.warn != nil {
			s.warn(pod, "InvalidEnvironmentVariableNames", fmt.Sprintf(
				"Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
				strings.Join(invalid, ", "), kind, pod.Namespace, name))
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		v, ok := svcEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		val := e.Value
		switch {
		case val != "":
			val = expand(val, lookup)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			if val, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP, hostIP); err != nil {
				return nil, err
			}
		case e.ValueFrom.ResourceFieldRef != nil:
			if val, err = s.resourceValue(pod, c, e.ValueFrom.ResourceFieldRef); err != nil {
				return nil, err
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := getCM(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			val = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			sec, err := getSecret(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := sec.Data[ref.Key]
			if !ok {
				if optional(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			val = string(v)
		}
		set(e.Name, val)
	}
	out := make([]string, 0, len(env)+len(svcEnv)+2)
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(svcEnv)) {
		if _, ok := env[k]; !ok {
			out = append(out, k+"="+svcEnv[k])
		}
	}
	return out, nil
}

func optional(b *bool) bool { return b != nil && *b }

// expand replaces $(VAR) with VAR's value where lookup knows it; $$ is a
// literal $, and unknown or unclosed references stay as written.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandArgs expands $(VAR) in a command or args with the container's env.
func expandArgs(argv, env []string) []string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	lookup := func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = expand(a, lookup)
	}
	return out
}

// fieldValue is the downward API's value of a pod field.
func fieldValue(pod *corev1.Pod, path, podIP, hostIP string) (string, error) {
	if sub, ok := mapKey(path, "metadata.labels"); ok {
		return pod.Labels[sub], nil
	}
	if sub, ok := mapKey(path, "metadata.annotations"); ok {
		return pod.Annotations[sub], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// mapKey parses prefix['key'].
func mapKey(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap renders a map as the downward API does: sorted key="value"
// lines.
func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceValue is a container's request or limit in units of the divisor,
// rounded up; an unset limit is the node's allocatable.
func (s *envSources) resourceValue(pod *corev1.Pod, c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	target := c
	if ref.ContainerName != "" {
		target = nil
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == ref.ContainerName {
				target = &pod.Spec.Containers[i]
			}
		}
		if target == nil {
			return "", fmt.Errorf("container %s not found", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	var q resource.Quantity
	switch kind {
	case "limits":
		v, set := target.Resources.Limits[corev1.ResourceName(name)]
		if !set {
			v = s.allocatable[corev1.ResourceName(name)]
		}
		q = v
	case "requests":
		q = target.Resources.Requests[corev1.ResourceName(name)]
	default:
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == string(corev1.ResourceCPU) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}
