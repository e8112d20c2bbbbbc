// Package slicebench measures the EndpointSlice controller: Services whose
// pods all turn Ready at once, the time until every slice says so, and the
// API writes the controller used against the fewest possible. The baseline,
// measured in the same run, is an ideal writer that knows the answer and
// only writes it: the same number of slice updates, sent straight to the
// API server with the controller's concurrency.
package slicebench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/controller/endpointslice"
)

// Options size a run.
type Options struct {
	Services, PodsPerService int
	// Workers is how many clients flip pods Ready at once.
	Workers int
	// BatchPeriod is the controller's --endpointslice-updates-batch-period.
	BatchPeriod time.Duration
	// QPS and Burst are the controller manager's --kube-api-qps and
	// --kube-api-burst.
	QPS   float32
	Burst int
}

// Result is one run's figures.
type Result struct {
	Options
	// Flip is how long making every pod Ready took.
	Flip time.Duration
	// Converge is from the first pod made Ready to every slice listing
	// every pod Ready.
	Converge time.Duration
	// Writes are the controller's EndpointSlice writes meanwhile; Minimum
	// is one update per Service.
	Writes, Minimum int
	// Ideal is the time an ideal writer took for Minimum updates with the
	// controller's concurrency and no rate limit.
	Ideal time.Duration
	// ChangeToWrite is the controller's mean latency from a pod change to
	// the slice write, from its metrics.
	ChangeToWrite time.Duration
}

// Print writes the result with its ratios: the convergence time against
// the time the input took (pods cannot be made Ready faster than the API
// server takes their status), what remains after the last pod turned Ready
// against the ideal writer's time, and the writes against the minimum.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d Services x %d pods made Ready at once (batch period %s, controller client %g qps / %d burst)\n",
		r.Services, r.PodsPerService, r.BatchPeriod, r.QPS, r.Burst)
	fmt.Fprintf(w, "%-30s %10s\n", "pods made Ready in", r.Flip.Round(time.Millisecond))
	fmt.Fprintf(w, "%-30s %10s | ratio to the above  %6.3f\n", "every slice correct after", r.Converge.Round(time.Millisecond),
		r.Converge.Seconds()/r.Flip.Seconds())
	fmt.Fprintf(w, "%-30s %10s | ideal writer %10s | ratio %6.2f\n", "of which after the last pod", (r.Converge - r.Flip).Round(time.Millisecond),
		r.Ideal.Round(time.Millisecond), (r.Converge-r.Flip).Seconds()/r.Ideal.Seconds())
	fmt.Fprintf(w, "%-30s %10d | minimum      %10d | ratio %6.2f\n", "EndpointSlice writes", r.Writes, r.Minimum, float64(r.Writes)/float64(r.Minimum))
	fmt.Fprintf(w, "%-30s %10s\n", "mean change-to-write latency", r.ChangeToWrite.Round(time.Millisecond))
}

// Run starts an API server and a controller manager in this process on a
// temporary dir and loopback ports, and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	metricsAddr, err := benchenv.FreeAddr()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	cmo := cluster.DefaultControllerManagerOptions()
	cmo.Kubeconfig, cmo.MetricsBindAddress = srv.Kubeconfig, metricsAddr
	cmo.LeaderElection.Enabled = false
	cmo.EndpointSlice.BatchPeriod = o.BatchPeriod
	cmo.KubeAPIQPS, cmo.KubeAPIBurst = o.QPS, o.Burst
	cm, err := cluster.StartControllerManager(ctx, cmo)
	if err != nil {
		return nil, err
	}
	defer func() { stop(); _ = cm.Wait() }()

	b := &bench{o: o, cs: srv.Client, res: &Result{Options: o, Minimum: o.Services}}
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	watcher, err := b.watch(ctx)
	if err != nil {
		return nil, err
	}
	if err := watcher.settle(ctx, false); err != nil {
		return nil, fmt.Errorf("waiting for not-ready slices: %w", err)
	}
	writesBefore, err := b.sliceWrites(ctx)
	if err != nil {
		return nil, err
	}
	latencyBefore, err := changeToWrite(cm.MetricsURL)
	if err != nil {
		return nil, err
	}

	start := time.Now()
	if err := b.parallel(o.Services*o.PodsPerService, func(i int) error {
		return b.setReady(ctx, i, true)
	}); err != nil {
		return nil, err
	}
	b.res.Flip = time.Since(start)
	if err := watcher.settle(ctx, true); err != nil {
		return nil, fmt.Errorf("waiting for ready slices: %w", err)
	}
	b.res.Converge = watcher.convergedAt().Sub(start)
	// Writes still in flight are counted too.
	time.Sleep(max(o.BatchPeriod, time.Second))
	writesAfter, err := b.sliceWrites(ctx)
	if err != nil {
		return nil, err
	}
	b.res.Writes = writesAfter - writesBefore
	latencyAfter, err := changeToWrite(cm.MetricsURL)
	if err != nil {
		return nil, err
	}
	if n := latencyAfter.count - latencyBefore.count; n > 0 {
		b.res.ChangeToWrite = time.Duration((latencyAfter.sum - latencyBefore.sum) / n * float64(time.Second))
	}
	if err := b.ideal(ctx); err != nil {
		return nil, err
	}
	return b.res, nil
}

type bench struct {
	o   Options
	cs  kubernetes.Interface
	res *Result
}

const ns = "default"

func podName(i int) string       { return fmt.Sprintf("pod-%05d", i) }
func svcName(i int) string       { return fmt.Sprintf("svc-%04d", i) }
func podIP(i int) string         { return fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256) }
func (b *bench) svcOf(i int) int { return i / b.o.PodsPerService }

// parallel runs f(0..n-1) on the configured number of workers and returns
// the first error.
func (b *bench) parallel(n int, f func(i int) error) error {
	return benchenv.Parallel(n, b.o.Workers, f)
}

// setup creates a node, the Services and their pods, Running but not Ready.
func (b *bench) setup(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if _, err := b.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	if err := b.parallel(b.o.Services, func(i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svcName(i)},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"svc": svcName(i)},
				Ports: []corev1.ServicePort{{Port: 80}}},
		}
		_, err := b.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create services: %w", err)
	}
	return b.parallel(b.o.Services*b.o.PodsPerService, func(i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName(i), Labels: map[string]string{"svc": svcName(b.svcOf(i))}},
			Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		}
		if _, err := b.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod: %w", err)
		}
		return b.setReady(ctx, i, false)
	})
}

// setReady writes pod i's status: Running with its IP, Ready or not.
func (b *bench) setReady(ctx context.Context, i int, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	patch := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q}]}}`,
		podIP(i), podIP(i), status, time.Now().UTC().Format(time.RFC3339))
	_, err := b.cs.CoreV1().Pods(ns).Patch(ctx, podName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("set status of %s: %w", podName(i), err)
	}
	return nil
}

// sliceWrites reads the API server's count of EndpointSlice writes.
func (b *bench) sliceWrites(ctx context.Context) (int, error) {
	body, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scrape API server metrics: %w", err)
	}
	total := 0
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="endpointslices"`) {
			continue
		}
		if !strings.Contains(line, `verb="POST"`) && !strings.Contains(line, `verb="PUT"`) &&
			!strings.Contains(line, `verb="PATCH"`) && !strings.Contains(line, `verb="DELETE"`) {
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		total += int(n)
	}
	return total, sc.Err()
}

// histogram is one histogram's count and sum.
type histogram struct{ count, sum float64 }

// changeToWrite reads the EndpointSlice controller's change-to-write
// latency histogram.
func changeToWrite(url string) (histogram, error) {
	var h histogram
	resp, err := http.Get(url)
	if err != nil {
		return h, fmt.Errorf("scrape controller manager metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return h, fmt.Errorf("scrape controller manager metrics: %w", err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		for suffix, dst := range map[string]*float64{"_count": &h.count, "_sum": &h.sum} {
			if strings.HasPrefix(line, `svcnet_endpoints_change_to_write_seconds`+suffix+`{controller="endpointslice"}`) {
				v, err := strconv.ParseFloat(strings.Fields(line)[1], 64)
				if err != nil {
					return h, fmt.Errorf("parse %q: %w", line, err)
				}
				*dst = v
			}
		}
	}
	return h, nil
}

// ideal updates as many slices as there are Services, each once with its
// final content, with the controller's concurrency: the least any
// controller could spend on the API.
func (b *bench) ideal(ctx context.Context) error {
	const idealNS = "ideal"
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: idealNS}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	ready := func(v bool) *bool { return &v }
	slice := func(i int, isReady bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svcName(i), Namespace: idealNS, Labels: map[string]string{discoveryv1.LabelManagedBy: "slicebench"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: new(""), Port: new(int32(80)), Protocol: new(corev1.ProtocolTCP)}},
		}
		for p := i * b.o.PodsPerService; p < (i+1)*b.o.PodsPerService; p++ {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{podIP(p)},
				Conditions: discoveryv1.EndpointConditions{Ready: ready(isReady), Serving: ready(isReady), Terminating: ready(false)},
				NodeName:   new("node-1"),
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName(p)}})
		}
		return s
	}
	workers := b.o
	workers.Workers = cluster.DefaultControllerManagerOptions().EndpointSlice.Workers
	w := &bench{o: workers, cs: b.cs}
	created := make([]*discoveryv1.EndpointSlice, b.o.Services)
	if err := w.parallel(b.o.Services, func(i int) error {
		s, err := b.cs.DiscoveryV1().EndpointSlices(idealNS).Create(ctx, slice(i, false), metav1.CreateOptions{})
		created[i] = s
		return err
	}); err != nil {
		return fmt.Errorf("create ideal slices: %w", err)
	}
	start := time.Now()
	if err := w.parallel(b.o.Services, func(i int) error {
		next := slice(i, true)
		next.ResourceVersion = created[i].ResourceVersion
		_, err := b.cs.DiscoveryV1().EndpointSlices(idealNS).Update(ctx, next, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("update ideal slices: %w", err)
	}
	b.res.Ideal = time.Since(start)
	return nil
}

// sliceWatcher follows the controller's slices through an informer and
// tells when every Service's slices list all its pods with the wanted
// readiness.
type sliceWatcher struct {
	b        *bench
	informer cache.SharedIndexInformer
	mu       sync.Mutex
	last     time.Time // of the last slice event
}

func (b *bench) watch(ctx context.Context) (*sliceWatcher, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(ns))
	w := &sliceWatcher{b: b, informer: factory.Discovery().V1().EndpointSlices().Informer()}
	touch := func(any) {
		w.mu.Lock()
		w.last = time.Now()
		w.mu.Unlock()
	}
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: touch, UpdateFunc: func(_, o any) { touch(o) }, DeleteFunc: touch,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	context.AfterFunc(ctx, factory.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return nil, ctx.Err()
	}
	return w, nil
}

// correct says whether every Service's slices hold exactly its pods, all
// with the given readiness.
func (w *sliceWatcher) correct(ready bool) bool {
	count := map[string]int{}
	for _, obj := range w.informer.GetStore().List() {
		s := obj.(*discoveryv1.EndpointSlice)
		if s.AddressType != discoveryv1.AddressTypeIPv4 || s.Labels[discoveryv1.LabelManagedBy] != endpointslice.ControllerName {
			continue // the kubernetes Service's slice, say
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready != ready {
				return false
			}
			count[svc]++
		}
	}
	for i := range w.b.o.Services {
		if count[svcName(i)] != w.b.o.PodsPerService {
			return false
		}
	}
	return true
}

// settle waits until the slices are correct.
func (w *sliceWatcher) settle(ctx context.Context, ready bool) error {
	for !w.correct(ready) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// convergedAt is the time of the slice event that made the slices correct.
func (w *sliceWatcher) convergedAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
