package node

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func newNode(mutate func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func TestColumns(t *testing.T) {
	tests := []struct {
		name                 string
		node                 *corev1.Node
		status, roles, inner string
	}{
		{"no conditions", newNode(nil), "Unknown", "<none>", "<none>"},
		{"ready control plane", newNode(func(n *corev1.Node) {
			n.Labels = map[string]string{"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master", "node-role.kubernetes.io/": "x"}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.6"}}
		}), "Ready", "control-plane,master", "10.0.0.5"},
		{"not ready and cordoned", newNode(func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
		}), "NotReady,SchedulingDisabled", "<none>", "<none>"},
		{"cordoned without conditions", newNode(func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			"Unknown,SchedulingDisabled", "<none>", "<none>"},
	}
	cols := columns()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []interface{}{cols[1].Cell(tt.node), cols[2].Cell(tt.node), cols[5].Cell(tt.node)}
			want := []interface{}{tt.status, tt.roles, tt.inner}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("cell %d = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
	n := newNode(func(n *corev1.Node) {
		n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		n.Status.NodeInfo.OSImage = "Debian"
	})
	if got := strings.Join(registrytest.Names(cols), ","); got != "Name,Status,Roles,Age,Version,Internal-IP,External-IP,OS-Image,Kernel-Version,Container-Runtime" {
		t.Errorf("columns = %s", got)
	}
	if got := registrytest.TextRow(t, cols, n); got != "node-1|Unknown|<none>|v1.37.2|<none>|<none>|Debian|<unknown>|<unknown>" {
		t.Errorf("cells = %s", got)
	}
}

func TestCreateKeepsStatusAndDefaultsAllocatable(t *testing.T) {
	r := Resource()
	if !r.Status || !r.KeepStatusOnCreate || r.Namespaced {
		t.Fatalf("flags = status %v keep %v namespaced %v", r.Status, r.KeepStatusOnCreate, r.Namespaced)
	}
	n := newNode(func(n *corev1.Node) {
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
	})
	r.Strategy.Default(n)
	r.Strategy.PrepareForCreate(n)
	if n.Status.Allocatable.Pods().Value() != 110 {
		t.Errorf("allocatable = %v", n.Status.Allocatable)
	}
	if f := r.Fields(n); f["spec.unschedulable"] != "false" {
		t.Errorf("fields = %v", f)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Node)
		want   []string
	}{
		{"valid", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
			n.Spec.PodCIDRs = []string{"10.244.0.0/24", "fd00::/64"}
		}, nil},
		{"taint effect", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "a", Effect: "Sometimes"}} },
			[]string{`metadata.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}},
		{"missing effect", func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "a"}} },
			[]string{"metadata.taints[0].effect: Required value"}},
		{"duplicate taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "a", Value: "b", Effect: "NoSchedule"}}
		}, []string{`metadata.taints[1]: Duplicate value: {"Key":"a","Value":"b","Effect":"NoSchedule","TimeAdded":null}: taints must be unique by key and effect pair`}},
		{"two IPv4 CIDRs", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.0.0/24", "10.244.1.0/24"} },
			[]string{`spec.podCIDRs: Invalid value: ["10.244.0.0/24","10.244.1.0/24"]: may specify no more than one CIDR for each IP family`}},
		{"negative capacity", func(n *corev1.Node) {
			n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1")}
		},
			[]string{`status.capacity.cpu: Invalid value: "-1": must be greater than or equal to 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(tt.mutate)
			n.Status.Allocatable = corev1.ResourceList{}
			registrytest.ExpectErrors(t, strategy{}.Validate(n), tt.want...)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := newNode(func(n *corev1.Node) {
		n.Spec.PodCIDRs = []string{"10.244.0.0/24"}
		n.Spec.ProviderID = "svcnet://node-1"
	})
	changed := old.DeepCopy()
	changed.Spec.PodCIDRs = []string{"10.244.9.0/24"}
	changed.Spec.ProviderID = "svcnet://other"
	changed.Spec.Unschedulable = true
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(changed, old),
		`spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid`,
		`spec.providerID: Forbidden: node updates may not change providerID except from "" to valid`,
	)
	fresh := newNode(nil)
	assigned := fresh.DeepCopy()
	assigned.Spec.PodCIDRs = []string{"10.244.3.0/24"}
	if errs := (strategy{}).ValidateUpdate(assigned, fresh); len(errs) != 0 {
		t.Errorf("first pod CIDR assignment rejected: %v", errs)
	}
}
