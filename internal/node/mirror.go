package node

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Static pods. The kubelet runs the pods of its manifest directory itself,
// without the API server, and shows each in the API as a mirror pod: a pod
// bound to the node, owned by the Node, annotated kubernetes.io/config.mirror
// with the static pod's hash, whose status the kubelet reports and which it
// makes anew when someone deletes it. kubeadm's control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) runs so.
//
// svcnet's components run inside the node's process (the control plane of
// `svcnet up`, every node's Service proxy), so a StaticPod is a component
// that the agent only shows: it runs nothing for it, and the pod's
// readiness is the component's own health check.

// The kubelet's annotations of static and mirror pods.
const (
	configHashAnnotation   = "kubernetes.io/config.hash"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
	configSeenAnnotation   = "kubernetes.io/config.seen"
	configSourceAnnotation = "kubernetes.io/config.source"
	// staticPodSource is the kubelet's source of a manifest directory's pods.
	staticPodSource = "file"
)

// StaticPod is a component the node's process runs, which the agent shows
// as a mirror pod.
type StaticPod struct {
	// Pod is its manifest, as a static pod file holds it: the name (the
	// agent appends the node's, as the kubelet does), namespace, labels,
	// annotations and spec.
	Pod *corev1.Pod
	// Log is the file its containers log to, in the CRI format; the node
	// serves it as their log.
	Log string
	// Started says since when the component runs; zero while it has not
	// started.
	Started func() time.Time
	// Healthy is the containers' readiness check: nil when ready. It is
	// called every few seconds once the component has started.
	Healthy func(ctx context.Context) error
}

// isMirrorPod reports a pod that shows a static pod: the agent runs no
// containers for it.
func isMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[configMirrorAnnotation]
	return ok
}

// How often the components are checked, and how long a check may take.
const (
	staticCheckPeriod  = 2 * time.Second
	staticCheckTimeout = 2 * time.Second
)

// staticPods keeps the node's mirror pods in line with its static pods.
type staticPods struct {
	agent  *Agent
	pods   []*staticPod
	period time.Duration
	wake   chan struct{}
	// lastErr is the last sync's error, logged when it changes.
	lastErr string
}

// staticPod is a StaticPod as the kubelet keeps it: named for the node,
// with its hash and the time it was seen, and its last check.
type staticPod struct {
	StaticPod
	pod  *corev1.Pod
	hash string
	seen time.Time

	mu      sync.Mutex
	started time.Time
	health  error
	checked bool
	// recreate is when a mirror pod the agent deleted is made anew.
	recreate time.Time
}

// mirrorRecreateDelay is how long the agent waits to make a mirror pod
// anew after it deleted the one being deleted or outdated, about a
// kubelet's sync: a client that deleted it and waits until it is gone
// (kubectl delete) would otherwise find the new one under the name and
// wait for its deletion too.
const mirrorRecreateDelay = time.Second

// newStaticPods takes the agent's static pods as seen at now.
func newStaticPods(a *Agent, specs []StaticPod, now time.Time) *staticPods {
	s := &staticPods{agent: a, period: staticCheckPeriod, wake: make(chan struct{}, 1)}
	for _, spec := range specs {
		p := spec.Pod.DeepCopy()
		p.Name = p.Name + "-" + strings.ToLower(a.cfg.NodeName)
		if p.Namespace == "" {
			p.Namespace = metav1.NamespaceDefault
		}
		p.Spec.NodeName = a.cfg.NodeName
		// As the kubelet's: node problems do not evict static pods.
		tolerateAll := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
		if !slices.Contains(p.Spec.Tolerations, tolerateAll) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, tolerateAll)
		}
		hash := staticPodHash(p, a.cfg.NodeName)
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[configHashAnnotation] = hash
		p.Annotations[configSeenAnnotation] = now.Format(time.RFC3339Nano)
		p.Annotations[configSourceAnnotation] = staticPodSource
		p.UID = types.UID(hash)
		s.pods = append(s.pods, &staticPod{StaticPod: spec, pod: p, hash: hash, seen: now})
	}
	return s
}

// staticPodHash is the static pod's UID, as the kubelet's: a hash of the
// manifest and where it comes from, the same on every start with the same
// manifest.
func staticPodHash(p *corev1.Pod, node string) string {
	b, _ := json.Marshal(p)
	h := md5.New()
	h.Write(b)
	fmt.Fprintf(h, "host:%s", node)
	fmt.Fprintf(h, "file:%s", p.Name)
	return hex.EncodeToString(h.Sum(nil))
}

func (s *staticPods) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// byName finds the static pod a mirror pod shows.
func (s *staticPods) byName(namespace, name string) *staticPod {
	for _, sp := range s.pods {
		if sp.pod.Namespace == namespace && sp.pod.Name == name {
			return sp
		}
	}
	return nil
}

// state is the last check's result.
func (sp *staticPod) state() (started time.Time, health error, checked bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.started, sp.health, sp.checked
}

// run checks the components every period and keeps the mirror pods until
// ctx ends; a poke (a mirror pod changed or went) syncs at once.
func (s *staticPods) run(ctx context.Context) {
	t := time.NewTicker(s.period)
	defer t.Stop()
	s.check(ctx)
	for {
		s.syncAndLog(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.check(ctx)
		case <-s.wake:
		}
	}
}

func (s *staticPods) syncAndLog(ctx context.Context) {
	err := s.sync(ctx)
	msg := ""
	if err != nil && ctx.Err() == nil {
		msg = err.Error()
	}
	if msg != "" && msg != s.lastErr {
		slog.Warn("sync mirror pods", "node", s.agent.cfg.NodeName, "err", err)
	}
	s.lastErr = msg
}

// check asks every started component for its health, at once.
func (s *staticPods) check(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sp := range s.pods {
		wg.Go(func() { sp.check(ctx) })
	}
	wg.Wait()
}

var errNotStarted = errors.New("not started")

func (sp *staticPod) check(ctx context.Context) {
	var started time.Time
	if sp.Started != nil {
		started = sp.Started()
	}
	health := errNotStarted
	if !started.IsZero() {
		health = nil
		if sp.Healthy != nil {
			cctx, cancel := context.WithTimeout(ctx, staticCheckTimeout)
			health = sp.Healthy(cctx)
			cancel()
		}
	}
	if ctx.Err() != nil {
		return // stopping: the check says nothing of the component
	}
	sp.mu.Lock()
	was, wasChecked := sp.health == nil, sp.checked
	sp.started, sp.health, sp.checked = started, health, true
	sp.mu.Unlock()
	if now := health == nil; !wasChecked || now != was {
		if now {
			slog.Info("static pod ready", "pod", klogRef(sp.pod))
		} else {
			slog.Info("static pod not ready", "pod", klogRef(sp.pod), "reason", health)
		}
	}
}

// sync makes a mirror pod for each static pod that has none (or replaces
// one that is outdated or being deleted), reports their status, and
// deletes the mirror pods of the node that show no static pod of its.
func (s *staticPods) sync(ctx context.Context) error {
	a := s.agent
	var errs []error
	mine := map[types.NamespacedName]bool{}
	for _, sp := range s.pods {
		mine[types.NamespacedName{Namespace: sp.pod.Namespace, Name: sp.pod.Name}] = true
		mirror, err := a.podLister.Pods(sp.pod.Namespace).Get(sp.pod.Name)
		if err != nil {
			mirror = nil
		}
		if mirror != nil && (mirror.DeletionTimestamp != nil || mirror.Annotations[configMirrorAnnotation] != sp.hash) {
			// As the kubelet: it is deleted now and made anew.
			if err := s.deleteMirror(ctx, mirror); err != nil {
				errs = append(errs, err)
				continue
			}
			sp.recreate = time.Now().Add(mirrorRecreateDelay)
			time.AfterFunc(mirrorRecreateDelay, s.poke)
			continue
		}
		if mirror == nil {
			if time.Now().Before(sp.recreate) {
				continue
			}
			if mirror, err = s.create(ctx, sp); err != nil {
				errs = append(errs, err)
				continue
			}
			if mirror == nil {
				continue
			}
		}
		if err := a.updateStatus(ctx, mirror, s.status(sp, mirror)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, p := range listPods(a.podLister) {
		if isMirrorPod(p) && !mine[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] {
			if err := s.deleteMirror(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// create makes sp's mirror pod, owned by the Node (which the API server's
// node restriction asks of mirror pods); none while the Node is unknown or
// going away. It returns an existing mirror pod of the same hash.
func (s *staticPods) create(ctx context.Context, sp *staticPod) (*corev1.Pod, error) {
	a := s.agent
	node, err := a.nodeLister.Get(a.cfg.NodeName)
	if err != nil || node.DeletionTimestamp != nil {
		return nil, nil
	}
	m := sp.pod.DeepCopy()
	m.UID = ""
	m.Annotations[configMirrorAnnotation] = sp.hash
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
	}}
	pods := a.client.CoreV1().Pods(m.Namespace)
	created, err := pods.Create(ctx, m, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The informer has not seen it yet.
		existing, gerr := pods.Get(ctx, m.Name, metav1.GetOptions{})
		if gerr != nil || existing.Annotations[configMirrorAnnotation] != sp.hash || existing.DeletionTimestamp != nil {
			return nil, nil // the next sync sees it
		}
		return existing, nil
	}
	if err != nil {
		return nil, fmt.Errorf("create mirror pod %s: %w", klogRef(m), err)
	}
	slog.Info("created mirror pod", "pod", klogRef(created), "uid", created.UID)
	return created, nil
}

// deleteMirror deletes a mirror pod at once, if it is still the one seen.
func (s *staticPods) deleteMirror(ctx context.Context, p *corev1.Pod) error {
	err := s.agent.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &p.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete mirror pod %s: %w", klogRef(p), err)
	}
	return nil
}

// removeAll deletes the node's mirror pods, for an agent whose components
// stop with it.
func (s *staticPods) removeAll(ctx context.Context) {
	for _, sp := range s.pods {
		p, err := s.agent.client.CoreV1().Pods(sp.pod.Namespace).Get(ctx, sp.pod.Name, metav1.GetOptions{})
		if err != nil || p.Annotations[configMirrorAnnotation] != sp.hash {
			continue
		}
		if err := s.deleteMirror(ctx, p); err != nil {
			slog.Warn("remove mirror pod", "err", err)
		}
	}
}

// componentImageID is the image ID of components, which run inside
// svcnet rather than from an image.
const componentImageID = containerIDPrefix + "component/"

// status is the mirror pod's status as the kubelet reports a static pod's:
// Running from the component's start, Ready while its check passes.
func (s *staticPods) status(sp *staticPod, mirror *corev1.Pod) corev1.PodStatus {
	started, health, _ := sp.state()
	old := mirror.Status
	ip := s.agent.nodeIP.String()
	st := corev1.PodStatus{
		Phase:     corev1.PodPending,
		QOSClass:  old.QOSClass,
		HostIP:    ip,
		HostIPs:   []corev1.HostIP{{IP: ip}},
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: old.StartTime,
	}
	if st.StartTime == nil {
		t := sp.seen
		if !started.IsZero() && started.Before(t) {
			t = started
		}
		st.StartTime = ptr.To(metaTime(t))
	}
	ready := !started.IsZero() && health == nil
	var unready []string
	for _, c := range sp.pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: imageRef(c.Image), ImageID: componentImageID + c.Name, Started: ptr.To(false)}
		if started.IsZero() {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		} else {
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metaTime(started)}
			cs.Started, cs.Ready = ptr.To(true), ready
			cs.ContainerID = containerIDPrefix + componentContainerID(sp.hash, c.Name, started)
		}
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	if !started.IsZero() {
		st.Phase = corev1.PodRunning
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
		if !ok {
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, reason, msg
		}
		if prev := findCondition(old.Conditions, t); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		st.Conditions = append(st.Conditions, c)
	}
	// The kubelet's order.
	msg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	cond(corev1.PodReadyToStartContainers, true, "", "")
	cond(corev1.PodInitialized, true, "", "")
	cond(corev1.PodReady, ready, "ContainersNotReady", msg)
	cond(corev1.ContainersReady, ready, "ContainersNotReady", msg)
	cond(corev1.PodScheduled, true, "", "")
	return st
}

// componentContainerID is a container ID for one start of a component,
// the same in every status written while it runs.
func componentContainerID(hash, name string, started time.Time) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", hash, name, started.UnixNano()))
	return hex.EncodeToString(sum[:])
}
