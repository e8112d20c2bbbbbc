package nodeipam

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/controller"
)

func TestNodesGetDistinctPodCIDRs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	_, cidr, _ := net.ParseCIDR("10.244.0.0/16")
	c, err := New(ctx, Config{ClusterCIDR: cidr, NodeMaskSize: 24}, client, factory, controller.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go c.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := map[string]string{}
		for _, n := range []string{"a", "b", "c"} {
			node, err := client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got[n] = node.Spec.PodCIDR
		}
		if got["a"] != "" && got["c"] != "" {
			if got["b"] != "10.244.0.0/24" || got["a"] == got["c"] || got["a"] == got["b"] || got["c"] == got["b"] {
				t.Fatalf("pod CIDRs %v: want distinct blocks, b's kept", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod CIDRs after 5s: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
