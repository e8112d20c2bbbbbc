package pod

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func debugger(name string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "busybox", Command: []string{"sh"}, Stdin: true, TTY: true}}
}

func TestEphemeralContainersKeepTheRestOfThePod(t *testing.T) {
	old := created(newPod(nil))
	old.Status.Phase = corev1.PodRunning
	sent := old.DeepCopy()
	sent.Labels = map[string]string{"sneaked": "in"}
	sent.Spec.Containers[0].Image = "nginx:9"
	sent.Status.Phase = corev1.PodFailed
	sent.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debugger")}
	ephemeralContainers().PrepareForUpdate(sent, old)
	if len(sent.Spec.EphemeralContainers) != 1 || sent.Spec.EphemeralContainers[0].Name != "debugger" {
		t.Fatalf("ephemeral containers = %+v, want the one sent", sent.Spec.EphemeralContainers)
	}
	if sent.Labels != nil || sent.Spec.Containers[0].Image != "nginx:1.27" || sent.Status.Phase != corev1.PodRunning {
		t.Fatalf("a write of ephemeral containers changed more: labels %v, image %s, phase %s",
			sent.Labels, sent.Spec.Containers[0].Image, sent.Status.Phase)
	}
}

func TestValidateEphemeralContainersUpdate(t *testing.T) {
	withOne := func(p *corev1.Pod) { p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("debugger")} }
	tests := []struct {
		name   string
		old    func(*corev1.Pod)
		mutate func(*corev1.Pod)
		want   []string // none: valid
	}{
		{"first", nil, withOne, nil},
		{"second, reordered", withOne, func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("second"), debugger("debugger")}
		}, nil},
		{"removed", withOne, func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil },
			[]string{"spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"}},
		{"changed", withOne, func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "alpine" },
			[]string{"spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"}},
		{"fields a pod relies on", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}, func(p *corev1.Pod) {
			ec := debugger("debugger")
			ec.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
			ec.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
			ec.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "x"}}
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{ec}
		}, []string{
			"spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
			"spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
			"spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
		}},
		{"named as a container", nil, func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{debugger("web")}
		}, []string{`spec.ephemeralContainers[0].name: Duplicate value: "web"`}},
		{"unknown target", nil, func(p *corev1.Pod) {
			ec := debugger("debugger")
			ec.TargetContainerName = "nope"
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{ec}
		}, []string{`spec.ephemeralContainers[0].targetContainerName: Not found: "nope"`}},
		{"static pod", func(p *corev1.Pod) {
			p.Annotations = map[string]string{mirrorPodAnnotation: "x"}
			p.Spec.NodeName = "n1"
		}, withOne, []string{"[]: Forbidden: static pods do not support ephemeral containers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPod(tt.old)
			old = created(old)
			updated := old.DeepCopy()
			tt.mutate(updated)
			strategy{}.Default(updated)
			ephemeralContainers().PrepareForUpdate(updated, old)
			got := registrytest.Messages(ephemeralContainers().ValidateUpdate(updated, old))
			if len(got) != len(tt.want) {
				t.Fatalf("errors %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}
