package pod

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func newPod(mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// created runs a pod through the create path the API server takes.
func created(p *corev1.Pod) *corev1.Pod { return registrytest.Created(strategy{}, p) }

func TestDefaults(t *testing.T) {
	p := created(newPod(func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
		p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		p.Spec.Containers = append(p.Spec.Containers,
			corev1.Container{Name: "latest", Image: "busybox"},
			corev1.Container{Name: "digest", Image: "busybox@sha256:abcd"},
			corev1.Container{Name: "registry", Image: "localhost:5000/tools"},
			corev1.Container{Name: "pinned", Image: "busybox:latest"})
	}))
	c := p.Spec.Containers[0]
	checks := []struct {
		name      string
		got, want interface{}
	}{
		{"restartPolicy", p.Spec.RestartPolicy, corev1.RestartPolicyAlways},
		{"dnsPolicy", p.Spec.DNSPolicy, corev1.DNSClusterFirst},
		{"terminationGracePeriodSeconds", *p.Spec.TerminationGracePeriodSeconds, int64(30)},
		{"schedulerName", p.Spec.SchedulerName, "default-scheduler"},
		{"securityContext", reflect.DeepEqual(*p.Spec.SecurityContext, corev1.PodSecurityContext{}), true},
		{"enableServiceLinks", *p.Spec.EnableServiceLinks, true},
		{"serviceAccountName", p.Spec.ServiceAccountName, "default"},
		{"serviceAccount", p.Spec.DeprecatedServiceAccount, "default"},
		// The Priority admission plugin's, not the strategy's.
		{"no priority", p.Spec.Priority == nil, true},
		{"no preemptionPolicy", p.Spec.PreemptionPolicy == nil, true},
		{"imagePullPolicy tagged", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"imagePullPolicy untagged", p.Spec.Containers[1].ImagePullPolicy, corev1.PullAlways},
		{"imagePullPolicy digest", p.Spec.Containers[2].ImagePullPolicy, corev1.PullIfNotPresent},
		{"imagePullPolicy registry port", p.Spec.Containers[3].ImagePullPolicy, corev1.PullAlways},
		{"imagePullPolicy latest", p.Spec.Containers[4].ImagePullPolicy, corev1.PullAlways},
		{"terminationMessagePath", c.TerminationMessagePath, "/dev/termination-log"},
		{"terminationMessagePolicy", c.TerminationMessagePolicy, corev1.TerminationMessageReadFile},
		{"port protocol", c.Ports[0].Protocol, corev1.ProtocolTCP},
		{"probe timeout", c.LivenessProbe.TimeoutSeconds, int32(1)},
		{"probe period", c.LivenessProbe.PeriodSeconds, int32(10)},
		{"probe success", c.LivenessProbe.SuccessThreshold, int32(1)},
		{"probe failure", c.LivenessProbe.FailureThreshold, int32(3)},
		{"probe scheme", c.LivenessProbe.HTTPGet.Scheme, corev1.URISchemeHTTP},
		{"probe path", c.LivenessProbe.HTTPGet.Path, "/"},
		{"request from limit", c.Resources.Requests.Cpu().String(), "500m"},
		{"phase", p.Status.Phase, corev1.PodPending},
		{"qosClass", p.Status.QOSClass, corev1.PodQOSBurstable},
		{"tolerations", len(p.Spec.Tolerations), 2},
		{"not-ready toleration", p.Spec.Tolerations[0].Key, "node.kubernetes.io/not-ready"},
		{"unreachable toleration", p.Spec.Tolerations[1].Key, "node.kubernetes.io/unreachable"},
		{"toleration seconds", *p.Spec.Tolerations[0].TolerationSeconds, int64(300)},
		{"toleration effect", p.Spec.Tolerations[1].Effect, corev1.TaintEffectNoExecute},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if errs := (strategy{}).Validate(p); len(errs) != 0 {
		t.Errorf("defaulted pod does not validate: %v", errs)
	}
}

func TestAdmission(t *testing.T) {
	tests := []struct {
		name            string
		pod             *corev1.Pod
		tolerations     int
		serviceAccount  string
		mirrorHasNoSA   bool
		wantQOS         corev1.PodQOSClass
		wantGatedReason bool
	}{
		{name: "tolerates everything", pod: newPod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), tolerations: 1, serviceAccount: "default", wantQOS: corev1.PodQOSBestEffort},
		{name: "own account and system class", pod: newPod(func(p *corev1.Pod) {
			p.Spec.ServiceAccountName = "builder"
			p.Spec.PriorityClassName = "system-node-critical"
		}), tolerations: 2, serviceAccount: "builder", wantQOS: corev1.PodQOSBestEffort},
		{name: "guaranteed", pod: newPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
		}), tolerations: 2, serviceAccount: "default", wantQOS: corev1.PodQOSGuaranteed},
		{name: "gated", pod: newPod(func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
		}), tolerations: 2, serviceAccount: "default", wantQOS: corev1.PodQOSBestEffort, wantGatedReason: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := created(tt.pod)
			if len(p.Spec.Tolerations) != tt.tolerations {
				t.Errorf("tolerations = %v, want %d", p.Spec.Tolerations, tt.tolerations)
			}
			if p.Spec.ServiceAccountName != tt.serviceAccount {
				t.Errorf("serviceAccountName = %q, want %q", p.Spec.ServiceAccountName, tt.serviceAccount)
			}
			if p.Spec.Priority != nil || p.Spec.PreemptionPolicy != nil {
				t.Errorf("priority %v, preemptionPolicy %v: set by the strategy", p.Spec.Priority, p.Spec.PreemptionPolicy)
			}
			if p.Status.QOSClass != tt.wantQOS {
				t.Errorf("qosClass = %s, want %s", p.Status.QOSClass, tt.wantQOS)
			}
			if got := summarize(p).reason; (got == "SchedulingGated") != tt.wantGatedReason {
				t.Errorf("status = %q, gated %v", got, tt.wantGatedReason)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{"no image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" },
			[]string{"spec.containers[0].image: Required value"}},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil },
			[]string{"spec.containers: Required value"}},
		{"bad container name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Web_1" },
			[]string{`spec.containers[0].name: Invalid value: "Web_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{"duplicate container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "web", Image: "busybox"})
		}, []string{`spec.containers[1].name: Duplicate value: "web"`}},
		{"port out of range", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}}
		}, []string{"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{"bad protocol", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		}, []string{`spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`}},
		{"env name", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A=B", Value: "x"}, {Value: "y"}}
		}, []string{
			`spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`,
			"spec.containers[0].env[1].name: Required value",
		}},
		{"negative resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Mi")}
		}, []string{`spec.containers[0].resources.requests[memory]: Invalid value: "-1Mi": must be greater than or equal to 0`}},
		{"request above limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}, []string{`spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		{"unknown resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"gpu": resource.MustParse("1")}
		}, []string{
			`spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified`,
			`spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers`,
			`spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified`,
			`spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers`,
		}},
		{"restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			[]string{`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`}},
		{"dns policy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Google" },
			[]string{`spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`}},
		{"missing volume", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, []string{`spec.containers[0].volumeMounts[0].name: Not found: "data"`}},
		{"two volume types", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}, ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}}
		}, []string{"spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type"}},
		{"probe handler", func(p *corev1.Pod) { p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{} },
			[]string{"spec.containers[0].readinessProbe: Required value: must specify a handler type"}},
		{"image whitespace", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			[]string{`spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`}},
		{"ephemeral on create", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		}, []string{"spec.ephemeralContainers: Forbidden: cannot be set on create"}},
		{"matchLabelKeys also in the selector", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MatchLabelKeys: []string{"app"}}}}}
		}, []string{`spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0][0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector`}},
		{"label keys without a selector", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "zone", MismatchLabelKeys: []string{"tenant"}}}}}}
		}, []string{"spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.mismatchLabelKeys: Forbidden: must not be specified when labelSelector is not set"}},
		{"a key to match and to mismatch", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{}, MatchLabelKeys: []string{"tenant", "bad key"}, MismatchLabelKeys: []string{"tenant"}}}}}
		}, []string{
			`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[1]: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[0]: Invalid value: "tenant": exists in both matchLabelKeys and mismatchLabelKeys`,
		}},
		{"topology spread", func(p *corev1.Pod) {
			zero := int32(0)
			sometimes := corev1.NodeInclusionPolicy("Sometimes")
			p.Labels = map[string]string{"app": "web"}
			app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
				{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: &sometimes},
				{MaxSkew: 1, WhenUnsatisfiable: "Maybe", MinDomains: &zero},
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: app, MatchLabelKeys: []string{"app"}},
				{MaxSkew: 1, TopologyKey: "host", WhenUnsatisfiable: corev1.ScheduleAnyway, MatchLabelKeys: []string{"app"}},
			}
		}, []string{
			"spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
			`spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: "{zone, DoNotSchedule}"`,
			`spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: "Sometimes": supported values: "Honor", "Ignore"`,
			"spec.topologySpreadConstraints[1].topologyKey: Required value: can not be empty",
			`spec.topologySpreadConstraints[1].whenUnsatisfiable: Unsupported value: "Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"`,
			"spec.topologySpreadConstraints[1].minDomains: Invalid value: 0: must be greater than zero",
			"spec.topologySpreadConstraints[1].minDomains: Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not Maybe",
			`spec.topologySpreadConstraints[2][0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector`,
			"spec.topologySpreadConstraints[3].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set",
		}},
		{"deletion cost", func(p *corev1.Pod) { p.Annotations = map[string]string{deletionCostAnnotation: "lots"} },
			[]string{`metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: "lots": must be a 32bit integer`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			registrytest.ExpectErrors(t, strategy{}.Validate(created(newPod(tt.mutate))), tt.want...)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	const forbidden = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`," +
		"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
		"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	tests := []struct {
		name       string
		mutate     func(*corev1.Pod)
		wantPrefix string // "" means valid
	}{
		{"new image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }, ""},
		{"added toleration", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})
		}, ""},
		{"renamed container", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "api" }, forbidden},
		{"new env", func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} }, forbidden},
		{"added container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "busybox"})
		}, "spec.containers: Forbidden: pod updates may not add or remove containers"},
		{"removed toleration", func(p *corev1.Pod) { p.Spec.Tolerations = p.Spec.Tolerations[:1] },
			"spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"},
		{"longer deadline", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(100)) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := created(newPod(nil))
			updated := old.DeepCopy()
			tt.mutate(updated)
			s := strategy{}
			s.Default(updated)
			got := registrytest.Joined(s.ValidateUpdate(updated, old))
			if tt.wantPrefix == "" && got != "" {
				t.Fatalf("unexpected errors: %s", got)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) {
				t.Fatalf("got %q, want prefix %q", got, tt.wantPrefix)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	long := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	tests := []struct {
		name                    string
		pod                     *corev1.Pod
		ready, status, restarts string
	}{
		{"pending", newPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), "0/1", "Pending", "0"},
		{"waiting container", newPod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: long}}}}
		}), "0/1", "CrashLoopBackOff", "3 (5m ago)"},
		{"running", newPod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}), "1/1", "Running", "0"},
		{"init waiting", newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "migrate"}}
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "migrate", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}), "0/1", "Init:1/2", "0"},
		{"init failed", newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "setup"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2}}}}
		}), "0/1", "Init:ExitCode:2", "0"},
		{"sidecar", newPod(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
			p.Status.Phase = corev1.PodRunning
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}), "2/2", "Running", "0"},
		{"completed", newPod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}
		}), "0/1", "Completed", "0"},
		{"signal", newPod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Signal: 9, ExitCode: 137}}}}
		}), "0/1", "Signal:9", "0"},
		{"terminating", newPod(func(p *corev1.Pod) {
			p.DeletionTimestamp = &long
			p.Status.Phase = corev1.PodRunning
		}), "0/1", "Terminating", "0"},
		{"node lost", newPod(func(p *corev1.Pod) {
			p.DeletionTimestamp = &long
			p.Status.Reason = "NodeLost"
		}), "0/1", "Unknown", "0"},
		{"evicted", newPod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason = "Evicted"
		}), "0/1", "Evicted", "0"},
	}
	cols := columns()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []interface{}{cols[1].Cell(tt.pod), cols[2].Cell(tt.pod), cols[3].Cell(tt.pod)}
			want := []interface{}{tt.ready, tt.status, tt.restarts}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s = %v, want %v", cols[i+1].Name, got[i], want[i])
				}
			}
		})
	}
}

func TestWideColumns(t *testing.T) {
	p := newPod(func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}}
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}
	})
	cols := columns()
	if got := strings.Join(registrytest.Names(cols), ","); got != "Name,Ready,Status,Restarts,Age,IP,Node,Nominated Node,Readiness Gates" {
		t.Fatalf("columns = %s", got)
	}
	want := []interface{}{"10.244.0.5", "node-1", "<none>", "1/2"}
	for i, w := range want {
		c := cols[5+i]
		if c.Priority != 1 {
			t.Errorf("%s priority = %d, want 1", c.Name, c.Priority)
		}
		if got := c.Cell(p); got != w {
			t.Errorf("%s = %v, want %v", c.Name, got, w)
		}
	}
}

func TestFields(t *testing.T) {
	p := created(newPod(func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }))
	f := selectableFields(p)
	want := map[string]string{
		"spec.nodeName": "node-1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
		"spec.serviceAccountName": "default", "spec.hostNetwork": "false", "status.phase": "Pending",
		"status.podIP": "", "status.nominatedNodeName": "",
	}
	for k, v := range want {
		if got, ok := f[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
}
