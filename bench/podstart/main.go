// Command podstart measures pod start latency, from the create request to
// the pod's Ready condition, as seen by a client watching the pods: it
// starts `svcnet up` with its node in a network namespace made for the run,
// creates N pods bound to the node, and reports p50, p90, p99 and max. The
// baseline, from the same pods in the same run, is the API's share: create
// request to the pod's first watch event, which every start includes; the
// ratio is what running the pod (namespace, veth, IP, process, status)
// adds on top of storing it.
//
// With -storage it measures volume binding instead: N pods placed by the
// scheduler, each with a claim of its own of the default StorageClass
// (standard, WaitForFirstConsumer, the node's local-path provisioner),
// from the first create to all Running, against N pods with an emptyDir
// placed the same way in the same run (the baseline, first, deleted before
// the claims' batch: one node's /24 holds 253 pods).
//
// With -runc it measures the runc runtime: on a cluster started with
// --runtime runc, N pods of an image pulled from a registry
// (go-containerregistry's, on loopback: the host's static busybox as the
// image's root), already in the node's store, each run by runc under the
// node's shim host; against, on a cluster started with --runtime process
// in the same run, N pods of the image table's busybox run as host
// processes (the baseline), both `sleep 3600`: create to Ready p50/p99,
// and the proportional set size (PSS) of the processes the node runs for
// the pods (shims or the shim host, runc's and the containers'), per pod.
//
// It needs root; everything it creates is removed when it ends.
//
//	sudo go run ./bench/podstart -n 100
//	sudo go run ./bench/podstart -storage -n 200
//	sudo go run ./bench/podstart -runc -n 100
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
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const nodeName = "bench-node"

func main() {
	n := flag.Int("n", 100, "number of pods")
	workers := flag.Int("workers", 10, "concurrent creates")
	image := flag.String("image", "registry.k8s.io/pause:3.10", "image of the pods")
	svcnet := flag.String("svcnet", "", "svcnet binary (default: build ./cmd/svcnet)")
	storage := flag.Bool("storage", false, "measure pods with a WaitForFirstConsumer claim each against pods with an emptyDir")
	runc := flag.Bool("runc", false, "measure pods of a pulled image run by runc against the image table's busybox run as host processes")
	flag.Parse()
	mode := modeStart
	switch {
	case *storage:
		mode = modeStorage
	case *runc:
		mode = modeRunc
	}
	if err := run(*n, *workers, *image, *svcnet, mode); err != nil {
		fmt.Fprintln(os.Stderr, "podstart:", err)
		os.Exit(1)
	}
}

// What a run measures.
const (
	modeStart = iota
	modeStorage
	modeRunc
)

func run(n, workers int, image, binary string, mode int) (err error) {
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
	// The node's address: one end of a veth pair whose both ends are in
	// the namespace, so the default route leads nowhere outside it.
	for _, args := range [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", "eth1"},
		{"addr", "add", "198.18.0.2/24", "dev", "eth0"},
		{"link", "set", "eth1", "up"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "dev", "eth0"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := func(name string, extra ...string) (*cluster, error) {
		return startCluster(ctx, binary, filepath.Join(dir, name), ns, n, extra...)
	}
	if mode == modeRunc {
		return compareRunc(ctx, start, n, workers)
	}
	c, err := start("cluster")
	if err != nil {
		return err
	}
	defer c.stop()
	client := c.client
	switch mode {
	case modeStart:
		res, err := batch(ctx, client, "default", n, workers, func(name string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: image}}},
			}, nil
		}, podReady)
		if err != nil {
			return err
		}
		fmt.Printf("pods: %d (image %s, %d concurrent creates)\n", n, image, workers)
		fmt.Printf("create → Ready:       p50 %v  p90 %v  p99 %v  max %v\n", pct(res.done, 0.50), pct(res.done, 0.90), pct(res.done, 0.99), pct(res.done, 1))
		fmt.Printf("baseline create → first watch event: p50 %v  p99 %v\n", pct(res.seen, 0.50), pct(res.seen, 0.99))
		fmt.Printf("ratio to baseline: p50 %.1fx  p99 %.1fx\n",
			float64(pct(res.done, 0.50))/float64(max(pct(res.seen, 0.50), time.Millisecond)), float64(pct(res.done, 0.99))/float64(max(pct(res.seen, 0.99), time.Millisecond)))
		fmt.Printf("all Ready after %v (%.1f pods/s)\n", res.total.Round(time.Millisecond), float64(n)/res.total.Seconds())
		return nil
	}

	// The pods of both batches are placed by the scheduler.
	spec := func(volume corev1.VolumeSource) corev1.PodSpec {
		return corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: image, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: volume}},
		}
	}
	for _, ns := range []string{"emptydir", "claims"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	base, err := batch(ctx, client, "emptydir", n, workers, func(name string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spec(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})}, nil
	}, podRunning)
	if err != nil {
		return fmt.Errorf("emptyDir pods: %w", err)
	}
	// The claim pods get the node's addresses back: its /24 holds 253
	// pods, fewer than both batches.
	if err := deleteAll(ctx, client, "emptydir"); err != nil {
		return err
	}
	claims, err := batch(ctx, client, "claims", n, workers, func(name string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
		// No class: the default one, standard, as the seed's claim.
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: spec(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}})}, claim
	}, podRunning)
	if err != nil {
		return fmt.Errorf("claim pods: %w", err)
	}
	fmt.Printf("pods: %d (image %s, %d concurrent creates), placed by the scheduler\n", n, image, workers)
	fmt.Printf("emptyDir (baseline)        create → Running: p50 %v  p99 %v  all Running after %v\n", pct(base.done, 0.5), pct(base.done, 0.99), base.total.Round(time.Millisecond))
	fmt.Printf("WaitForFirstConsumer claim create → Running: p50 %v  p99 %v  all Running after %v\n", pct(claims.done, 0.5), pct(claims.done, 0.99), claims.total.Round(time.Millisecond))
	fmt.Printf("ratio claim/emptyDir: all Running %.2fx  p50 %.2fx  p99 %.2fx\n", claims.total.Seconds()/base.total.Seconds(),
		float64(pct(claims.done, 0.5))/float64(max(pct(base.done, 0.5), time.Millisecond)), float64(pct(claims.done, 0.99))/float64(max(pct(base.done, 0.99), time.Millisecond)))
	return nil
}

// cluster is a running `svcnet up` with its node in the bench's network
// namespace.
type cluster struct {
	client *kubernetes.Clientset
	// data is its data dir.
	data string
	stop func()
}

// startCluster starts `svcnet up` (with extra flags) on data dir dir, its
// node in network namespace ns, and waits for the node.
func startCluster(ctx context.Context, binary, dir, ns string, n int, extra ...string) (*cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	logf, err := os.Create(filepath.Join(dir, "up.log"))
	if err != nil {
		return nil, err
	}
	ports := freePorts(4)
	up := exec.Command(binary, append([]string{"up", "--data-dir", data, "--netns", ns, "--node-name", nodeName,
		"--bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--etcd-client-url", fmt.Sprintf("https://127.0.0.1:%d", ports[1]),
		"--etcd-peer-url", fmt.Sprintf("https://127.0.0.1:%d", ports[2]),
		"--kubelet-address", fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"--metrics-bind-address", "0",
		// Both batches of -storage stay on the one node.
		"--max-pods", strconv.Itoa(2*n + 20)}, extra...)...)
	up.Stdout, up.Stderr = logf, logf
	up.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := up.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start svcnet up: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = up.Wait()
		close(exited)
	}()
	stop := func() {
		// SIGTERM: up stops its pods and removes their namespaces.
		_ = up.Process.Signal(syscall.SIGTERM)
		<-exited
		logf.Close()
	}
	client, err := waitNode(ctx, filepath.Join(data, "kubeconfig"), exited)
	if err != nil {
		stop()
		log, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w; svcnet up's log:\n%s", err, log[max(0, len(log)-4000):])
	}
	return &cluster{client: client, data: data, stop: stop}, nil
}

// deleteAll deletes the pods of namespace ns at once and waits until
// they are gone.
func deleteAll(ctx context.Context, client kubernetes.Interface, ns string) error {
	pods := client.CoreV1().Pods(ns)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete the pods of %s: %w", ns, err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list the pods of %s: %w", ns, err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of %s still there: %w", len(list.Items), ns, ctx.Err())
		case <-tick.C:
		}
	}
}

// result is one batch's latencies, sorted: create (of the first object) to
// the pod's first watch event (seen) and to its done condition; total is
// from the first create to the last pod done.
type result struct {
	seen, done []time.Duration
	total      time.Duration
}

// batch creates n objects in namespace ns with workers concurrent
// creators, each a pod from mk and, first, its claim if mk gives one, and
// waits until every pod is done.
func batch(ctx context.Context, client kubernetes.Interface, ns string, n, workers int,
	mk func(name string) (*corev1.Pod, *corev1.PersistentVolumeClaim), done func(*corev1.Pod) bool) (*result, error) {
	pods := client.CoreV1().Pods(ns)
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	defer w.Stop()

	var mu sync.Mutex
	created := map[string]time.Time{}
	names := make(chan string)
	var wg sync.WaitGroup
	defer wg.Wait()
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for name := range names {
				pod, claim := mk(name)
				start := time.Now()
				if claim != nil {
					if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
						errc <- fmt.Errorf("create claim %s: %w", name, err)
						return
					}
				}
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the feeder when a creator fails
	begin := time.Now()
	wg.Go(func() {
		defer close(names)
		for i := range n {
			select {
			case names <- fmt.Sprintf("bench-%03d", i):
			case <-ctx.Done():
				return
			}
		}
	})

	seenAt, doneAt := map[string]time.Time{}, map[string]time.Time{}
	for len(doneAt) < n {
		select {
		case err := <-errc:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d pods done before the deadline", len(doneAt), n)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, errors.New("the pod watch ended")
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			if _, seen := seenAt[pod.Name]; !seen {
				seenAt[pod.Name] = now
			}
			if _, seen := doneAt[pod.Name]; !seen && done(pod) {
				doneAt[pod.Name] = now
			}
		}
	}
	res := &result{total: time.Since(begin)}
	wg.Wait() // every create is recorded
	for name, t := range doneAt {
		res.done = append(res.done, t.Sub(created[name]))
		res.seen = append(res.seen, seenAt[name].Sub(created[name]))
	}
	slices.Sort(res.done)
	slices.Sort(res.seen)
	return res, nil
}

// pct is the p-quantile of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	return d[min(len(d)-1, int(float64(len(d))*p))].Round(time.Millisecond)
}

func podRunning(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitNode waits for the kubeconfig and for the node to be Ready, unless
// up exits first.
func waitNode(ctx context.Context, kubeconfig string, exited <-chan struct{}) (*kubernetes.Clientset, error) {
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
		case <-exited:
			return nil, errors.New("svcnet up exited")
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
