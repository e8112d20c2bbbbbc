package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAdmissionCheck(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"disk": "ssd"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourcePods: resource.MustParse("3")}}}
	pod := func(name string, mutate func(*corev1.PodSpec)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if mutate != nil {
			mutate(&p.Spec)
		}
		return p
	}
	port := func(hostIP string, protocol corev1.Protocol) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: hostIP, Protocol: protocol}}
		}
	}
	cpu := func(q string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
		}
	}
	onLoopback := pod("loopback", port("127.0.0.1", corev1.ProtocolTCP))
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		others []*corev1.Pod
		want   string
	}{
		{"another address", pod("p", port("10.0.0.1", "")), []*corev1.Pod{onLoopback}, ""},
		{"another protocol", pod("p", port("", corev1.ProtocolUDP)), []*corev1.Pod{onLoopback}, ""},
		{"all addresses", pod("p", port("", "")), []*corev1.Pod{onLoopback},
			"NodePorts: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"the same address", pod("p", port("127.0.0.1", "")), []*corev1.Pod{onLoopback}, "NodePorts: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"cpu left", pod("p", cpu("1500m")), []*corev1.Pod{pod("q", cpu("500m"))}, ""},
		{"cpu short", pod("p", cpu("1600m")), []*corev1.Pod{pod("q", cpu("500m"))},
			"OutOfcpu: Node didn't have enough resource: cpu, requested: 1600, used: 500, capacity: 2000"},
		{"pods", pod("p", nil), []*corev1.Pod{pod("a", nil), pod("b", nil), pod("c", nil)},
			"OutOfpods: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"},
		{"node selector", pod("p", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "hdd"} }), nil,
			"NodeAffinity: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{"node selector met", pod("p", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} }), nil, ""},
	} {
		got := ""
		if rej := admissionCheck(tc.pod, node, tc.others); rej != nil {
			got = rej.reason + ": " + rej.message
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}, {Key: "soft", Effect: corev1.TaintEffectNoSchedule}}
	if rej := admissionCheck(pod("p", nil), tainted, nil); rej == nil || rej.reason != "TaintToleration" {
		t.Errorf("an untolerated NoExecute taint: %+v", rej)
	}
	tolerant := pod("p", func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	})
	if rej := admissionCheck(tolerant, tainted, nil); rej != nil {
		t.Errorf("a tolerated NoExecute taint (and a NoSchedule one): %+v", rej)
	}
}
