// Package podcertificate is the node's pod certificate manager, as the
// kubelet's (pkg/kubelet/podcertificate): for each podCertificate source
// of a projected volume of a pod on the node, it makes a private key of
// the source's keyType and asks the source's signer for a certificate
// with a PodCertificateRequest in the pod's namespace. The request names
// the pod, its service account and the node, each with its UID, carries
// the source's maxExpirationSeconds and userAnnotations, and holds a
// PKCS#10 request signed with the key, which proves to the API server that
// the node holds it. The manager watches the node's requests
// (spec.nodeName=<node>, all a node may list) and, once the signer has
// issued one, hands the key and the certificate chain to the volume; until
// then the volume cannot be set up, so the pod's containers wait.
//
// After the certificate's beginRefreshAt (plus up to five minutes, so that
// the node's requests spread out) it asks again with a new key, and keeps
// handing out the old credentials until the new ones are issued. A Denied
// or Failed request ends the projection's requests: an event on the pod
// says why, and the volume fails with the reason. A request the watch does
// not show for ten minutes is taken as deleted and made anew. The keys
// live in the manager's memory and in the pods' volumes only (tmpfs): a
// restarted node asks for every certificate anew.
//
// One goroutine, Run's, does all the work: a workqueue of projections,
// fed by the pods' syncs (Track) and by changes of their requests.
package podcertificate

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's timings.
const (
	// abandonAfter is how long (plus jitter) a request the node made may
	// be missing from its watch before it is taken as deleted.
	abandonAfter = 10 * time.Minute
	// overdueAfter is how long after beginRefreshAt credentials not yet
	// replaced are reported overdue.
	overdueAfter = 10 * time.Minute
	// maxJitter spreads the node's requests.
	maxJitter = 5 * time.Minute
)

// Config is what a Manager works with.
type Config struct {
	// Client makes the requests and reads the pods' service accounts.
	Client kubernetes.Interface
	// NodeName is the node's; Nodes gives its UID.
	NodeName string
	Nodes    corelisters.NodeLister
	// Pods are the node's pods.
	Pods corelisters.PodLister
	// Recorder records the events of a pod's projections.
	Recorder record.EventRecorder
	// Changed is told of a pod whose credentials changed (issued,
	// replaced, denied or failed), to write its volumes again.
	Changed func(*corev1.Pod)
}

// Manager keeps the credentials of the node's podCertificate projections.
type Manager struct {
	cfg      Config
	now      func() time.Time
	queue    workqueue.TypedRateLimitingInterface[key]
	factory  informers.SharedInformerFactory
	requests certlisters.PodCertificateRequestLister
	synced   cache.InformerSynced

	mu     sync.Mutex
	states map[key]*state
}

// key names one podCertificate source of a pod.
type key struct {
	pod    types.UID
	volume string
	// source is the index of the projection in the volume's sources.
	source int
}

// New is a manager whose work ends with ctx; Run does it.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	requests := factory.Certificates().V1().PodCertificateRequests()
	m := &Manager{
		cfg:      cfg,
		now:      time.Now,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]()),
		factory:  factory,
		requests: requests.Lister(),
		states:   map[key]*state{},
	}
	context.AfterFunc(ctx, m.queue.ShutDown)
	// A change of a request is looked at at once: the pod starts as soon
	// as its certificate is issued.
	changed := func(obj any) {
		if r, ok := informer.Object[*certificatesv1.PodCertificateRequest](obj); ok {
			if pod := m.pod(r.Spec.PodUID); pod != nil {
				m.Track(pod)
			}
		}
	}
	synced, err := informer.Handle(requests.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) }, DeleteFunc: changed,
	})
	if err != nil {
		return nil, fmt.Errorf("watch PodCertificateRequests: %w", err)
	}
	m.synced = synced
	return m, nil
}

// Run watches the node's requests and works on its projections until
// ctx (New's) ends; it returns once the watch has stopped.
func (m *Manager) Run(ctx context.Context) {
	m.factory.Start(ctx.Done())
	defer m.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), m.synced) {
		return
	}
	for m.next(ctx) {
	}
}

// next works on one projection; false once the queue has shut down.
func (m *Manager) next(ctx context.Context) bool {
	k, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(k)
	if err := m.sync(ctx, k); err != nil {
		slog.Warn("podCertificate projection", "podUID", k.pod, "volume", k.volume, "source", k.source, "err", err)
		m.queue.AddRateLimited(k)
		return true
	}
	m.queue.Forget(k)
	return true
}

// Track has the pod's podCertificate projections looked at: the node
// calls it on each sync of the pod, which starts a new pod's requests.
func (m *Manager) Track(pod *corev1.Pod) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Projected == nil {
			continue
		}
		for j, s := range v.Projected.Sources {
			if s.PodCertificate != nil {
				m.queue.Add(key{pod: pod.UID, volume: v.Name, source: j})
			}
		}
	}
}

// Forget drops the credentials of a pod that is gone.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.states {
		if k.pod == uid {
			delete(m.states, k)
		}
	}
}

// Credentials are the private key and certificate chain (PEM) of the
// pod's volume's podCertificate source at index source; an error until a
// certificate is issued, or why none will be.
func (m *Manager) Credentials(pod *corev1.Pod, volume string, source int) (keyPEM, chain []byte, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.states[key{pod: pod.UID, volume: volume, source: source}]
	switch {
	case st == nil || st.key == nil && st.final == nil:
		return nil, nil, fmt.Errorf("credential bundle is not issued yet")
	case st.final != nil:
		return nil, nil, st.final
	}
	return st.key, st.chain, nil
}

// pod is the node's pod of uid, nil when there is none (mirror pods,
// which get no certificates, are none).
func (m *Manager) pod(uid types.UID) *corev1.Pod {
	pods, _ := m.cfg.Pods.List(labels.Everything())
	for _, p := range pods {
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; p.UID == uid && !mirror {
			return p
		}
	}
	return nil
}

// sync moves one projection's state on; an error retries it with backoff.
func (m *Manager) sync(ctx context.Context, k key) error {
	pod := m.pod(k.pod)
	if pod == nil {
		m.Forget(k.pod)
		return nil
	}
	src := projection(pod, k)
	if src == nil {
		return nil
	}
	m.mu.Lock()
	st, ok := m.states[k]
	if !ok {
		st = &state{}
		m.states[k] = st
	}
	cur := *st
	m.mu.Unlock()
	// The queue never hands out a key twice at once: cur is this
	// projection's until it is stored back (unless the pod was forgotten
	// meanwhile).
	changed, err := m.advance(ctx, pod, src, k, &cur)
	m.mu.Lock()
	if m.states[k] == st {
		*st = cur
	}
	m.mu.Unlock()
	// Told once Credentials has the news.
	if changed {
		m.cfg.Changed(pod)
	}
	return err
}

// projection is the podCertificate source k names, nil if none.
func projection(pod *corev1.Pod, k key) *corev1.PodCertificateProjection {
	for _, v := range pod.Spec.Volumes {
		if v.Name == k.volume && v.Projected != nil && k.source < len(v.Projected.Sources) {
			return v.Projected.Sources[k.source].PodCertificate
		}
	}
	return nil
}

// jitter is a random wait of up to maxJitter.
func jitter() time.Duration { return rand.N(maxJitter) }
