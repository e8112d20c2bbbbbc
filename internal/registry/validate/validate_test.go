package validate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestPullPolicyFor(t *testing.T) {
	tests := map[string]corev1.PullPolicy{
		"nginx":                         corev1.PullAlways,
		"nginx:latest":                  corev1.PullAlways,
		"nginx:1.27":                    corev1.PullIfNotPresent,
		"docker.io/library/nginx":       corev1.PullAlways,
		"localhost:5000/app":            corev1.PullAlways,
		"localhost:5000/app:v2":         corev1.PullIfNotPresent,
		"registry.example.com:443/a/b":  corev1.PullAlways,
		"nginx@sha256:0123456789abcdef": corev1.PullIfNotPresent,
		"nginx:latest@sha256:0123":      corev1.PullAlways,
		"Nginx":                         corev1.PullIfNotPresent, // does not parse
		"":                              corev1.PullIfNotPresent,
	}
	for image, want := range tests {
		if got := PullPolicyFor(image); got != want {
			t.Errorf("PullPolicyFor(%q) = %s, want %s", image, got, want)
		}
	}
}

// spec returns a defaulted single-container pod spec changed by mutate.
func spec(mutate func(*corev1.PodSpec)) *corev1.PodSpec {
	s := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}}}
	mutate(s)
	DefaultPodSpec(s)
	return s
}

func TestPodSpec(t *testing.T) {
	pod := &metav1.ObjectMeta{Name: "web"}
	tests := []struct {
		name   string
		mutate func(*corev1.PodSpec)
		want   string
	}{
		{"valid", func(*corev1.PodSpec) {}, ""},
		{"liveness success threshold", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{SuccessThreshold: 2,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}, "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		{"two handlers", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"true"}}, TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}}
		}, "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"},
		{"init container probe", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "busybox",
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
		}, "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"},
		{"init name clash", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "app", Image: "busybox"}}
		}, `spec.initContainers[0].name: Duplicate value: "app"`},
		{"host port clash", func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: "b", Image: "busybox"})
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			s.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}
		}, `spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`},
		{"downward API field", func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "PHASE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.phase"}}},
				{Name: "BAD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nothing"}}},
			}
		}, `spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase": supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"` +
			"\n" + `spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Invalid value: "spec.nothing": error converting fieldPath: field label not supported: spec.nothing`},
		{"value and valueFrom", func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}
		}, `spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when ` + "`value`" + ` is not empty`},
		{"extended resource", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}
			s.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": resource.MustParse("500m")}
		}, `spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "500m": must be an integer` + "\n" +
			`spec.containers[0].resources.requests: Invalid value: "500m": must be equal to example.com/gpu limit of 1`},
		{"volume path", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: []corev1.KeyToPath{{Key: "a", Path: "../a"}}}}}}
		}, `spec.volumes[0].configMap.items[0].path: Invalid value: "../a": must not contain '..'`},
		{"bad volume name", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "Data"}}
		}, `spec.volumes[0].name: Invalid value: "Data": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"duplicate mount path", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "a"}, {Name: "b"}}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "a", MountPath: "/x"}, {Name: "b", MountPath: "/x"}}
		}, `spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/x": must be unique`},
		{"toleration", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Value: "b"}}
		}, `spec.tolerations[0].operator: Invalid value: "b": value must be empty when ` + "`operator`" + ` is 'Exists'`},
		{"comparison toleration", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpGt, Value: "5"}}
		}, `spec.tolerations[0].operator: Unsupported value: "Gt": supported values: "Equal", "Exists", "Lt", "Gt"`},
		{"unknown toleration operator", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "a", Operator: "Near"}}
		}, `spec.tolerations[0].operator: Unsupported value: "Near": supported values: "Equal", "Exists"`},
		{"dns none", func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSNone },
			"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"},
		{"host network port", func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}, "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"},
		{"pod certificate", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: "example.com/spiffe", KeyType: "ED25519", CredentialBundlePath: "creds.pem"}}}}}}}
		}, ""},
		{"pod certificate too long", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: "example.com/spiffe", KeyType: "ED25519", CredentialBundlePath: "creds.pem", MaxExpirationSeconds: ptr.To[int32](91*24*3600 + 1)}}}}}}}
		}, "spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 7862401: if provided, maxExpirationSeconds must be <= 7862400"},
		{"pod certificate of a Kubernetes signer", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: "kubernetes.io/kube-apiserver-client-pod", KeyType: "RSA3072", KeyPath: "k", CertificateChainPath: "k",
					MaxExpirationSeconds: ptr.To[int32](3599)}}}}}}}
		}, `spec.volumes[0].projected: Invalid value: "k": conflicting duplicate paths` + "\n" +
			"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 3599: if provided, maxExpirationSeconds must be >= 3600"},
		{"pod certificate without paths", func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/spiffe", KeyType: "DSA"}}}}}}}
		}, `spec.volumes[0].projected.sources[0].podCertificate.keyType: Unsupported value: "DSA": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"` + "\n" +
			"spec.volumes[0].projected.sources[0].podCertificate: Required value: specify at least one of credentialBundlePath, keyPath, and certificateChainPath"},
		{"node affinity", func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
		}, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := registrytest.Joined(PodSpec(spec(tt.mutate), pod, field.NewPath("spec"))); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestPodTemplateSpec(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: *spec(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
			s.Containers[0].Image = " busybox"
		}),
	}
	// templates allow an unset host port and a padded image
	if got := registrytest.Joined(PodTemplateSpec(tmpl, field.NewPath("spec", "template"))); got != "" {
		t.Errorf("got %s", got)
	}
	tmpl.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
	if got := registrytest.Joined(PodTemplateSpec(tmpl, field.NewPath("template"))); got != "template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template" {
		t.Errorf("got %s", got)
	}
}

func TestDefaultPodSpec(t *testing.T) {
	s := spec(func(s *corev1.PodSpec) {
		s.Volumes = []corev1.Volume{
			{Name: "empty"},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		}
		s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.0001")}
		s.Containers[0].Env = []corev1.EnvVar{{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	})
	if s.Volumes[0].EmptyDir == nil || *s.Volumes[1].ConfigMap.DefaultMode != 0644 || *s.Volumes[2].Projected.DefaultMode != 0644 ||
		*s.Volumes[2].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3600 {
		t.Errorf("volume defaults: %+v", s.Volumes)
	}
	if got := s.Containers[0].Resources.Limits.Cpu().String(); got != "1m" {
		t.Errorf("cpu limit rounded to %s, want 1m", got)
	}
	if s.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion != "v1" {
		t.Error("fieldRef apiVersion not defaulted")
	}
	if s.Containers[0].Resources.Requests != nil {
		t.Error("requests from limits is a pod default, not a pod spec one")
	}
}

func TestShared(t *testing.T) {
	tests := []struct {
		name string
		errs field.ErrorList
		want string
	}{
		{"finalizer", KubeFinalizerName("cleanup", field.NewPath("f")),
			`f: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully qualified`},
		{"qualified finalizer", KubeFinalizerName("example.com/cleanup", field.NewPath("f")), ""},
		{"link local", NonSpecialIP("169.254.169.254", field.NewPath("ip")),
			`ip: Invalid value: "169.254.169.254": may not be in the link-local range (169.254.0.0/16, fe80::/10)`},
		{"protocol", Protocol("", field.NewPath("p")), "p: Required value"},
		// Upstream's ValidateCSIDriverName stops at a missing name.
		{"no CSI driver", CSIDriverName("", field.NewPath("d")), "d: Required value"},
		{"upper case CSI driver", CSIDriverName("Disk.Example.com", field.NewPath("d")), ""},
		{"port name", PortNumOrName(intstr.FromString("http--x"), field.NewPath("p")),
			`p: Invalid value: "http--x": must not contain consecutive hyphens`},
		{"hugepages without cpu", ResourceRequirements(&corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{"hugepages-2Mi": resource.MustParse("4Mi")},
			Requests: corev1.ResourceList{"hugepages-2Mi": resource.MustParse("4Mi")}}, field.NewPath("r")),
			"r: Forbidden: HugePages require cpu or memory"},
		{"claim spec", PersistentVolumeClaimSpec(&corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeMode:  ptr.To(corev1.PersistentVolumeMode("Tape"))}, field.NewPath("spec")),
			`spec.volumeMode: Unsupported value: "Tape": supported values: "Block", "Filesystem"`},
	}
	for _, tt := range tests {
		if got := registrytest.Joined(tt.errs); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
