// Command podstart measures pod start latency, from the create request to
// the pod's Ready condition, as seen by a client watching the pods: it
// starts `svcnet up` with its node in a network namespace made for the run,
// creates N pods bound to the node, and reports p50, p90, p99 and max. The
// baseline, from the same pods in the same run, is the API's share: create
// request to the pod's first watch event, which every start includes; the
// ratio is what running the pod (namespace, veth, IP, process, status)
// adds on top of storing it. It needs root; everything it creates is
// removed when it ends.
//
//	sudo go run ./bench/podstart -n 100
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const nodeName = "bench-node"

func main() {
	n := flag.Int("n", 100, "number of pods")
	workers := flag.Int("workers", 10, "concurrent creates")
	image := flag.String("image", "registry.k8s.io/pause:3.10", "image of the pods")
	svcnet := flag.String("svcnet", "", "svcnet binary (default: build ./cmd/svcnet)")
	flag.Parse()
	if err := run(*n, *workers, *image, *svcnet); err != nil {
		fmt.Fprintln(os.Stderr, "podstart:", err)
		os.Exit(1)
	}
}

func run(n, workers int, image, binary string) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root for the node's network namespace")
	}
	dir, err := os.MkdirTemp("", "svcnet-podstart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if binary == "" {
		binary = filepath.Join(dir, "svcnet")
		build := exec.Command("go", "build", "-o", binary, "./cmd/svcnet")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build svcnet: %w", err)
		}
	}
	ns := fmt.Sprintf("svcnet-bench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer func() {
		if out, derr := exec.Command("ip", "netns", "del", ns).CombinedOutput(); derr != nil {
			err = errors.Join(err, fmt.Errorf("ip netns del: %v: %s", derr, out))
		}
	}()

	data := filepath.Join(dir, "data")
	logf, err := os.Create(filepath.Join(dir, "up.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	ports := freePorts(4)
	up := exec.Command(binary, "up", "--data-dir", data, "--netns", ns, "--node-name", nodeName,
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--etcd-client-url", fmt.Sprintf("https://127.0.0.1:%d", ports[1]),
		"--etcd-peer-url", fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		"--kubelet-address", fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"--metrics-bind-address", "0")
	up.Stdout, up.Stderr = logf, logf
	up.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := up.Start(); err != nil {
		return fmt.Errorf("start svcnet up: %w", err)
	}
	defer func() {
		// SIGTERM: up stops its pods and removes their namespaces.
		_ = up.Process.Signal(syscall.SIGTERM)
		_ = up.Wait()
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := waitNode(ctx, filepath.Join(data, "kubeconfig"))
	if err != nil {
		return err
	}
	pods := client.CoreV1().Pods("default")
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	defer w.Stop()

	var mu sync.Mutex
	created := map[string]time.Time{}
	names := make(chan string)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for name := range names {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: image}}},
				}
				start := time.Now()
				if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errc <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				mu.Lock()
				created[name] = start
				mu.Unlock()
			}
		})
	}
	begin := time.Now()
	go func() {
		defer close(names)
		for i := range n {
			select {
			case names <- fmt.Sprintf("bench-%03d", i):
			case <-ctx.Done():
				return
			}
		}
	}()

	seenAt, readyAt := map[string]time.Time{}, map[string]time.Time{}
	for len(readyAt) < n {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pods Ready before the deadline", len(readyAt), n)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the pod watch ended")
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			if _, seen := seenAt[pod.Name]; !seen {
				seenAt[pod.Name] = now
			}
			if _, seen := readyAt[pod.Name]; !seen && podReady(pod) {
				readyAt[pod.Name] = now
			}
		}
	}
	total := time.Since(begin)
	wg.Wait()

	var lat, api []time.Duration
	for name, t := range readyAt {
		lat = append(lat, t.Sub(created[name]))
		api = append(api, seenAt[name].Sub(created[name]))
	}
	slices.Sort(lat)
	slices.Sort(api)
	pct := func(d []time.Duration, p float64) time.Duration {
		return d[min(len(d)-1, int(float64(len(d))*p))].Round(time.Millisecond)
	}
	fmt.Printf("pods: %d (image %s, %d concurrent creates)\n", n, image, workers)
	fmt.Printf("create → Ready:       p50 %v  p90 %v  p99 %v  max %v\n", pct(lat, 0.50), pct(lat, 0.90), pct(lat, 0.99), pct(lat, 1))
	fmt.Printf("baseline create → first watch event: p50 %v  p99 %v\n", pct(api, 0.50), pct(api, 0.99))
	fmt.Printf("ratio to baseline: p50 %.1fx  p99 %.1fx\n",
		float64(pct(lat, 0.50))/float64(max(pct(api, 0.50), time.Millisecond)), float64(pct(lat, 0.99))/float64(max(pct(api, 0.99), time.Millisecond)))
	fmt.Printf("all Ready after %v (%.1f pods/s)\n", total.Round(time.Millisecond), float64(n)/total.Seconds())
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitNode waits for the kubeconfig and for the node to be Ready.
func waitNode(ctx context.Context, kubeconfig string) (*kubernetes.Clientset, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
			cfg.QPS, cfg.Burst = 500, 1000
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return nil, err
			}
			if node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
				for _, c := range node.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						return client, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("the node did not become Ready")
		case <-t.C:
		}
	}
}

// freePorts returns loopback ports nobody listens on now.
func freePorts(n int) []int {
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			slog.Error("find a free port", "err", err)
			os.Exit(1)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}
