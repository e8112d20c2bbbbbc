package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/allocator"
)

// dbInUse is the bytes etcd's database holds in pages in use.
func dbInUse(t *testing.T, cli *clientv3.Client, endpoint string) int64 {
	t.Helper()
	st, err := cli.Status(context.Background(), endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return st.DbSizeInUse
}

// cycles runs clients workers, each creating and deleting its own objects
// n times through create and del, and returns the creates' latencies.
func cycles(t *testing.T, clients, n int, create func(ctx context.Context, name string) error, del func(ctx context.Context, name string) error) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		wg.Go(func() {
			for i := range n {
				name := fmt.Sprintf("c%03d-%d", w, i)
				start := time.Now()
				if err := create(ctx, name); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				d := time.Since(start)
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
				if err := del(ctx, name); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(took)
	return took
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// TestServiceChurnCost: 100 clients create and delete 2,000 ClusterIP
// Services, and as many ConfigMaps of the same stored size, on one API
// server. A Service write allocates without a hot key: the etcd database
// grows by at most twice the ConfigMaps' growth (the IPAddress objects and
// the coalesced bitmap view included), and, with the same 100 clients
// alternating the two, the p99 of a Service create is at most three times
// a ConfigMap create's.
func TestServiceChurnCost(t *testing.T) {
	c := startAPIServer(t)
	cli := c.etcd()
	cs := c.clientsetQPS(-1)
	const clients, perClient = 100, 20
	ctx := context.Background()

	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "churn"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	}
	// The ConfigMaps are padded to the stored size of such a Service.
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("probe"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/registry/services/default/probe")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the probe Service: %v", err)
	}
	svcSize := len(resp.Kvs[0].Value)
	if err := cs.CoreV1().Services("default").Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := func(name string, pad int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "churn"}},
			Data: map[string]string{"pad": strings.Repeat("x", max(pad, 0))}}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm("probe", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resp, err = cli.Get(ctx, "/registry/configmaps/default/probe")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the probe ConfigMap: %v", err)
	}
	pad := svcSize - len(resp.Kvs[0].Value)
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, "probe", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	before := dbInUse(t, cli, c.etcdClient)
	cycles(t, clients, perClient,
		func(ctx context.Context, name string) error {
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm(name, pad), metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, name string) error {
			return cs.CoreV1().ConfigMaps("default").Delete(ctx, name, metav1.DeleteOptions{})
		})
	cmGrowth := dbInUse(t, cli, c.etcdClient) - before

	before = dbInUse(t, cli, c.etcdClient)
	cycles(t, clients, perClient,
		func(ctx context.Context, name string) error {
			_, err := cs.CoreV1().Services("default").Create(ctx, svc(name), metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, name string) error {
			return cs.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
		})
	// The bitmap view catches up after the churn; its writes count.
	eventually(t, 30*time.Second, func() string {
		if view := ipBitmap(t, cli, allocator.ServiceIPsKey); len(view) != 1 {
			return fmt.Sprintf("the bitmap view holds %d addresses, want the kubernetes Service's", len(view))
		}
		return ""
	})
	svcGrowth := dbInUse(t, cli, c.etcdClient) - before

	// Latency is compared in a phase of its own where every client
	// alternates the two kinds, so that both see the same load (other
	// tests run beside this one).
	var mu sync.Mutex
	var cmLat, svcLat []time.Duration
	cycles(t, clients, perClient/2, func(ctx context.Context, name string) error {
		start := time.Now()
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm(name, pad), metav1.CreateOptions{}); err != nil {
			return err
		}
		mid := time.Now()
		if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		svcStart := time.Now()
		_, err := cs.CoreV1().Services("default").Create(ctx, svc(name), metav1.CreateOptions{})
		mu.Lock()
		cmLat, svcLat = append(cmLat, mid.Sub(start)), append(svcLat, time.Since(svcStart))
		mu.Unlock()
		return err
	}, func(ctx context.Context, name string) error {
		return cs.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
	})
	slices.Sort(cmLat)
	slices.Sort(svcLat)
	cmTook, svcTook := cmLat, svcLat
	cmP99, svcP99 := percentile(cmTook, 0.99), percentile(svcTook, 0.99)
	t.Logf("%d cycles each (stored size %d bytes): etcd in use grew %d KiB for ConfigMaps, %d KiB for Services (%.2fx)",
		clients*perClient, svcSize, cmGrowth>>10, svcGrowth>>10, float64(svcGrowth)/float64(max(cmGrowth, 1)))
	t.Logf("create latency p50/p99, %d of each interleaved: ConfigMap %s/%s, Service %s/%s (p99 %.2fx)", len(cmTook),
		percentile(cmTook, 0.5), cmP99, percentile(svcTook, 0.5), svcP99, float64(svcP99)/float64(cmP99))
	if cmGrowth <= 0 {
		t.Fatalf("the ConfigMap cycles did not grow the database (%d bytes): nothing to compare with", cmGrowth)
	}
	if svcGrowth > 2*cmGrowth {
		t.Errorf("Service cycles grew etcd by %d bytes, more than twice the ConfigMaps' %d", svcGrowth, cmGrowth)
	}
	if svcP99 > 3*cmP99 {
		t.Errorf("Service create p99 %s is more than three times the ConfigMap create p99 %s", svcP99, cmP99)
	}
	checkAllocations(t, cli)
}
