// Package schedbench measures the scheduler: a backlog of pods, created
// before the scheduler starts, placed on simulated nodes (Node objects
// registered through the API, Ready, with no agent behind them), in pods
// placed per second. The baselines, measured in the same run on the same
// API server, are the rate of creating those pods and the rate of binding
// as many pods straight through pods/binding with the scheduler's
// parallelism: the least any scheduler has to spend per pod.
package schedbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/controller/scheduler"
)

// Options size a run.
type Options struct {
	Nodes, Pods int
	// Owners is how many controllers the pods belong to, for spreading.
	Owners int
	// Workers is how many clients create pods at once.
	Workers int
	// Scheduler is the scheduler's configuration (parallelism, client
	// rate limit).
	Scheduler scheduler.Options
}

// Result is one run's figures.
type Result struct {
	Options
	// Create is how long creating the pods took; Schedule is from the
	// scheduler's start to the last pod bound, informer sync included;
	// Direct is how long binding as many pods directly took.
	Create, Schedule, Direct time.Duration
	// MinPerNode and MaxPerNode are the fewest and most pods a node got.
	MinPerNode, MaxPerNode int
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// Print writes the rates and the ratios of the scheduler's to each
// baseline.
func (r *Result) Print(w io.Writer) {
	s := r.Scheduler
	fmt.Fprintf(w, "%d pods of %d controllers on %d nodes (scheduler parallelism %d, client %g qps / %d burst)\n",
		r.Pods, r.Owners, r.Nodes, s.Parallelism, s.QPS, s.Burst)
	sched := rate(r.Pods, r.Schedule)
	fmt.Fprintf(w, "%-24s %10.0f pods/s\n", "pods created", rate(r.Pods, r.Create))
	fmt.Fprintf(w, "%-24s %10.0f pods/s\n", "pods bound directly", rate(r.Pods, r.Direct))
	fmt.Fprintf(w, "%-24s %10.0f pods/s | ratio to creates %6.2f | ratio to direct binds %6.2f\n", "pods scheduled", sched,
		sched/rate(r.Pods, r.Create), sched/rate(r.Pods, r.Direct))
	fmt.Fprintf(w, "%-24s %10d to %d (even: %d)\n", "pods per node", r.MinPerNode, r.MaxPerNode, r.Pods/r.Nodes)
}

// Run starts an API server in this process on a temporary dir and
// loopback ports, registers the nodes, creates the pods, then starts a
// controller manager running only the scheduler and measures. Events the
// scheduler has not written when the last pod is bound are not waited for.
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
	b := &bench{o: o, cs: srv.Client, res: &Result{Options: o}}
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	w, err := b.watch(ctx)
	if err != nil {
		return nil, err
	}

	cmo := cluster.DefaultControllerManagerOptions()
	cmo.Kubeconfig, cmo.MetricsBindAddress = srv.Kubeconfig, metricsAddr
	cmo.LeaderElection.Enabled = false
	cmo.Controllers = []string{"scheduler"}
	cmo.Scheduler = o.Scheduler
	if err := b.schedule(ctx, cmo, w); err != nil {
		return nil, err
	}
	if err := b.direct(ctx); err != nil {
		return nil, err
	}
	return b.res, nil
}

// schedule runs the scheduler until every pod is bound, and stops it
// before the API server (and before the direct bindings are timed).
func (b *bench) schedule(ctx context.Context, cmo cluster.ControllerManagerOptions, w *binds) error {
	ctx, stop := context.WithCancel(ctx)
	start := time.Now()
	cm, err := cluster.StartControllerManager(ctx, cmo)
	if err != nil {
		stop()
		return err
	}
	defer func() { stop(); _ = cm.Wait() }()
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("%d of %d pods bound: %w", w.count(), b.o.Pods, ctx.Err())
	}
	b.res.Schedule = w.last().Sub(start)
	b.res.MinPerNode, b.res.MaxPerNode = w.spread(b.o.Nodes)
	return nil
}

type bench struct {
	o   Options
	cs  kubernetes.Interface
	res *Result
}

const ns = "default"

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

// pod is the i-th pod of the run: a small request, one of the owners'.
func (b *bench) pod(namespace, schedulerName string, i int) *corev1.Pod {
	owner := i % b.o.Owners
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: namespace,
			Labels: map[string]string{"app": fmt.Sprintf("app-%03d", owner)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("app-%03d", owner),
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", owner)), Controller: new(true)}}},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}}},
	}
}

// setup registers the nodes, Ready, and creates the pods, timing the
// creates.
func (b *bench) setup(ctx context.Context) error {
	if err := benchenv.Parallel(b.o.Nodes, b.o.Workers, func(i int) error {
		n, err := b.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i),
			Labels: map[string]string{corev1.LabelHostname: nodeName(i)}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node: %w", err)
		}
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}
		n.Status.Capacity = n.Status.Allocatable
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if _, err := b.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("make node ready: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	start := time.Now()
	if err := benchenv.Parallel(b.o.Pods, b.o.Workers, func(i int) error {
		_, err := b.cs.CoreV1().Pods(ns).Create(ctx, b.pod(ns, corev1.DefaultSchedulerName, i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create pods: %w", err)
	}
	b.res.Create = time.Since(start)
	return nil
}

// direct binds as many pods, of a scheduler that does not run, straight
// to the nodes in turn with the scheduler's parallelism.
func (b *bench) direct(ctx context.Context) error {
	const directNS = "direct"
	if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: directNS}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if err := benchenv.DefaultServiceAccount(ctx, b.cs, directNS); err != nil {
		return err
	}
	if err := benchenv.Parallel(b.o.Pods, b.o.Workers, func(i int) error {
		_, err := b.cs.CoreV1().Pods(directNS).Create(ctx, b.pod(directNS, "no-such-scheduler", i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create pods to bind: %w", err)
	}
	start := time.Now()
	if err := benchenv.Parallel(b.o.Pods, b.o.Scheduler.Parallelism, func(i int) error {
		return b.cs.CoreV1().Pods(directNS).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: directNS, Name: fmt.Sprintf("pod-%05d", i)},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName(i % b.o.Nodes)},
		}, metav1.CreateOptions{})
	}); err != nil {
		return fmt.Errorf("bind pods: %w", err)
	}
	b.res.Direct = time.Since(start)
	return nil
}

// binds follows the pods through an informer and tells when all are
// bound.
type binds struct {
	mu     sync.Mutex
	want   int
	bound  map[types.UID]string // node per bound pod
	lastAt time.Time
	done   chan struct{}
}

func (b *bench) watch(ctx context.Context) (*binds, error) {
	w := &binds{want: b.o.Pods, bound: map[types.UID]string{}, done: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, dup := w.bound[p.UID]; dup {
			return
		}
		w.bound[p.UID] = p.Spec.NodeName
		w.lastAt = time.Now()
		if len(w.bound) == w.want {
			close(w.done)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	context.AfterFunc(ctx, factory.Shutdown)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return w, nil
}

func (w *binds) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

func (w *binds) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastAt
}

// spread is the fewest and most pods bound to one node.
func (w *binds) spread(nodes int) (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	per := map[string]int{}
	for _, n := range w.bound {
		per[n]++
	}
	counts := make([]int, 0, nodes)
	for i := range nodes {
		counts = append(counts, per[nodeName(i)])
	}
	return slices.Min(counts), slices.Max(counts)
}
