package apibench

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
)

// ServiceResult compares creates of Services, which allocate a cluster IP
// (and a node port) in the same etcd transaction, with creates of
// ConfigMaps, which allocate nothing, measured in the same run against the
// same API server.
type ServiceResult struct {
	N, Workers int
	ConfigMaps Stat
	// Services are the ClusterIP and the NodePort creates.
	Services []Stat
}

// Print writes the result with the Service/ConfigMap ratios.
func (r *ServiceResult) Print(w io.Writer) {
	fmt.Fprintf(w, "%d creates of each kind, %d workers\n", r.N, r.Workers)
	fmt.Fprintf(w, "%-18s %10s %10s %10s | %-10s %10s | %8s\n", "svcnet", "creates/s", "p50", "p99", "baseline", "creates/s", "ratio")
	c := r.ConfigMaps
	for _, s := range r.Services {
		fmt.Fprintf(w, "%-18s %10.0f %10s %10s | %-10s %10.0f | %8.3f\n",
			s.Name, s.Rate(), round(s.P50), round(s.P99), c.Name, c.Rate(), s.Rate()/c.Rate())
	}
}

// RunServices starts an API server on embedded etcd, with the default
// ranges (10.96.0.0/12, 30000-32767), and measures.
func RunServices(ctx context.Context, o Options) (*ServiceResult, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	cms, svcs := srv.Client.CoreV1().ConfigMaps("default"), srv.Client.CoreV1().Services("default")
	cm := measure("configmap", o, func(i int) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i)},
			Data: map[string]string{"port": "80"}}, metav1.CreateOptions{})
		return err
	})
	service := func(name string, t corev1.ServiceType) measured {
		return measure(name, o, func(i int) error {
			_, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%06d", name, i)},
				Spec: corev1.ServiceSpec{Type: t, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}},
				metav1.CreateOptions{})
			return err
		})
	}
	ip, np := service("svc-clusterip", corev1.ServiceTypeClusterIP), service("svc-nodeport", corev1.ServiceTypeNodePort)
	for _, m := range []measured{cm, ip, np} {
		if m.err != nil {
			return nil, fmt.Errorf("%s: %w", m.stat.Name, m.err)
		}
	}
	return &ServiceResult{N: o.N, Workers: o.Workers, ConfigMaps: cm.stat, Services: []Stat{ip.stat, np.stat}}, nil
}
