package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podWorker owns one pod: its goroutine runs every sync of that pod, one at
// a time, so that no two actions on a pod race.
type podWorker struct {
	uid  types.UID
	wake chan struct{}

	mu sync.Mutex
	// pod is the latest from the API; gone is set once it left the API.
	pod  *corev1.Pod
	gone bool
	// running are the container run directories seen running at the last
	// sync, which the relist loop watches for exits.
	running []string
	timer   *time.Timer
	// end is the kubelet's ending the pod is due for (an eviction for
	// local storage over its limits, its active deadline), ended set once
	// it is done: the pod is then finished, whatever its phase in a
	// stale copy says.
	end   *podEnd
	ended bool
	// admitted is set once the node admitted the pod (admit.go).
	admitted bool
}

// poke asks for a sync soon.
func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pokeAfter asks for a sync after d, replacing an earlier request.
func (w *podWorker) pokeAfter(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = time.AfterFunc(d, w.poke)
}

// endedBy records that the pod's final status is written, once the
// write (err) succeeded, and returns err.
func (w *podWorker) endedBy(err error) error {
	if err == nil {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	}
	return err
}

func (w *podWorker) snapshot() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.gone
}

// worker returns uid's worker, starting it if needed.
func (a *Agent) worker(ctx context.Context, uid types.UID) *podWorker {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.workers[uid]; ok {
		return w
	}
	w := &podWorker{uid: uid, wake: make(chan struct{}, 1)}
	a.workers[uid] = w
	a.wg.Go(func() { a.runWorker(ctx, w) })
	return w
}

func (a *Agent) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || a.runCtx.Err() != nil {
		return
	}
	if isMirrorPod(pod) {
		a.static.poke()
		return
	}
	w := a.worker(a.runCtx, pod.UID)
	w.mu.Lock()
	w.pod, w.gone = pod, false
	w.mu.Unlock()
	w.poke()
}

func (a *Agent) podGone(ctx context.Context, uid types.UID) {
	if ctx.Err() != nil {
		return
	}
	w := a.worker(ctx, uid)
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.poke()
}

// runWorker syncs the pod on every poke until the pod is gone and cleaned
// up, or ctx ends.
func (a *Agent) runWorker(ctx context.Context, w *podWorker) {
	defer func() {
		w.mu.Lock()
		if w.timer != nil {
			w.timer.Stop()
		}
		w.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		done, retry, err := a.syncPod(ctx, w)
		if err != nil && ctx.Err() == nil {
			slog.Error("Error syncing pod, skipping", "podUID", w.uid, "err", err)
			if retry == 0 {
				retry = 2 * time.Second
			}
		}
		if done {
			a.mu.Lock()
			delete(a.workers, w.uid)
			a.mu.Unlock()
			a.probes.removePod(w.uid)
			return
		}
		if retry > 0 {
			w.pokeAfter(retry)
		}
	}
}

// podWorkers are the current pod workers.
func (a *Agent) podWorkers() []*podWorker {
	a.mu.Lock()
	defer a.mu.Unlock()
	ws := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		ws = append(ws, w)
	}
	return ws
}

// relist finds containers that exited since the last sync of their pod,
// as the kubelet's PLEG relists every second.
func (a *Agent) relist(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, w := range a.podWorkers() {
			w.mu.Lock()
			dirs := w.running
			w.mu.Unlock()
			for _, d := range dirs {
				c, err := a.rt.load(d)
				if err != nil || c == nil || !c.Running() {
					w.poke()
					break
				}
			}
		}
	}
}

// podRecord is what the agent keeps of a pod beside its containers: the
// pod as last seen (to stop it once it left the API) and its sandbox.
type podRecord struct {
	Pod   *corev1.Pod `json:"pod"`
	IP    string      `json:"ip,omitempty"`
	NetNS string      `json:"netns,omitempty"`
}

const podRecordFile = "pod.json"

func (a *Agent) loadPodRecord(uid string) (podRecord, error) {
	return readJSON[podRecord](filepath.Join(a.rt.podDir(uid), podRecordFile))
}

// syncPod brings one pod in line. done means the worker may stop; retry
// asks for another sync after that long.
func (a *Agent) syncPod(ctx context.Context, w *podWorker) (done bool, retry time.Duration, err error) {
	pod, gone := w.snapshot()
	uid := string(w.uid)
	if gone || pod == nil {
		return a.removePod(ctx, uid)
	}
	if pod.DeletionTimestamp != nil {
		return false, 0, a.terminatePod(ctx, w, pod)
	}
	w.mu.Lock()
	end, ended := w.end, w.ended
	w.mu.Unlock()
	if podTerminal(pod) {
		return false, 0, a.finishPod(ctx, pod)
	}
	if ended {
		// Its status is written; this copy predates it.
		return false, 0, nil
	}
	if rej := a.admit(w, pod); rej != nil {
		return false, 0, w.endedBy(a.rejectPod(ctx, pod, rej))
	}
	left, deadline := activeDeadlineLeft(pod, time.Now())
	if end == nil && deadline && left <= 0 {
		end = &podEnd{reason: "DeadlineExceeded", message: deadlineExceededMessage}
	}
	if end != nil {
		return false, 0, w.endedBy(a.endPod(ctx, pod, end))
	}
	if err := a.runPod(ctx, w, pod); err != nil || !deadline {
		return false, 0, err
	}
	// Synced again when its active deadline passes.
	return false, left, nil
}

// removePod stops and deletes everything of a pod no longer in the API.
func (a *Agent) removePod(ctx context.Context, uid string) (bool, time.Duration, error) {
	rec, err := a.loadPodRecord(uid)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, 0, err
	}
	if err := a.killContainers(ctx, uid, rec.Pod, nil); err != nil {
		return false, 0, err
	}
	if err := a.net.Teardown(uid); err != nil {
		return false, 0, err
	}
	logDir := ""
	if rec.Pod != nil {
		logDir = filepath.Dir(filepath.Dir(a.rt.logPath(rec.Pod.Namespace, rec.Pod.Name, uid, "x", 0)))
	}
	if err := a.tearDownVolumes(uid); err != nil {
		return false, 0, err
	}
	if err := a.rt.remove(uid, logDir); err != nil {
		return false, 0, fmt.Errorf("remove pod files: %w", err)
	}
	for _, key := range a.backoffKeys(rec.Pod) {
		a.backoff.DeleteEntry(key)
	}
	a.forgetPulls(rec.Pod)
	return true, 0, nil
}

// terminatePod stops a pod being deleted within its grace period, then
// deletes it from the API for good.
func (a *Agent) terminatePod(ctx context.Context, w *podWorker, pod *corev1.Pod) error {
	grace := gracePeriod(pod, nil)
	uid := string(pod.UID)
	if err := a.killWatchingStatus(ctx, w, pod, grace); err != nil {
		return err
	}
	if err := a.net.Teardown(uid); err != nil {
		return err
	}
	runs, err := a.rt.containers(uid)
	if err != nil {
		return err
	}
	w.setRunning(nil)
	st := a.podStatus(pod, runs, nil, true)
	if err := a.updateStatus(ctx, pod, st); err != nil && !apierrors.IsNotFound(err) {
		slog.Info("final pod status", "pod", klogRef(pod), "err", err)
	}
	err = a.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", klogRef(pod), err)
	}
	return nil
}

// killWatchingStatus stops the pod's containers within grace; meanwhile
// each poke of its worker (a probe's new result, a container's end) shows
// in its status, as the kubelet's status manager goes on during a long
// termination: a container that turns unready on SIGTERM leaves the
// Service's ready endpoints before it ends.
func (a *Agent) killWatchingStatus(ctx context.Context, w *podWorker, pod *corev1.Pod, grace time.Duration) error {
	uid := string(pod.UID)
	done := make(chan error, 1)
	go func() { done <- a.killContainers(ctx, uid, pod, &grace) }()
	for {
		select {
		case err := <-done:
			return err
		case <-w.wake:
		}
		cur, gone := w.snapshot()
		if gone || cur == nil || cur.UID != pod.UID {
			continue
		}
		runs, err := a.rt.containers(uid)
		if err != nil {
			continue
		}
		if err := a.updateStatus(ctx, cur, a.podStatus(cur, runs, nil, true)); err != nil && !apierrors.IsNotFound(err) {
			slog.Info("status of a terminating pod", "pod", klogRef(cur), "err", err)
		}
	}
}

// finishPod stops what a finished pod still runs, its sidecars and pause
// container, and removes its network; it keeps its logs, and its status
// shows the sidecars' ends.
func (a *Agent) finishPod(ctx context.Context, pod *corev1.Pod) error {
	uid := string(pod.UID)
	grace := gracePeriod(pod, nil)
	if err := a.killContainers(ctx, uid, pod, &grace); err != nil {
		return err
	}
	if err := a.net.Teardown(uid); err != nil {
		return err
	}
	runs, err := a.rt.containers(uid)
	if err != nil {
		return err
	}
	if len(runs) == 0 && pod.Status.StartTime == nil {
		// Nothing of it ever ran here (the node rejected it): its status
		// is whoever failed it.
		return nil
	}
	return a.updateStatus(ctx, pod, a.podStatus(pod, runs, nil, false))
}

// gracePeriod is the pod's deletion grace, else its spec's, at least 2 s
// as the kubelet allows; override comes from a probe.
func gracePeriod(pod *corev1.Pod, override *int64) time.Duration {
	g := int64(corev1.DefaultTerminationGracePeriodSeconds)
	switch {
	case override != nil:
		g = *override
	case pod == nil:
		g = 2
	case pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(max(g, 2)) * time.Second
}

// killContainers stops every running container of the pod in parallel,
// running preStop hooks first, within the grace period.
func (a *Agent) killContainers(ctx context.Context, uid string, pod *corev1.Pod, grace *time.Duration) error {
	runs, err := a.rt.containers(uid)
	if err != nil {
		return err
	}
	g := gracePeriod(pod, nil)
	if grace != nil {
		g = *grace
	}
	// The pod's containers first, then its sidecars, then its pause
	// container, as the kubelet stops them.
	sidecar := func(c *container) bool {
		spec := (*corev1.Container)(nil)
		if pod != nil {
			spec = specContainer(pod, c.Spec.Name)
		}
		return spec != nil && isSidecar(spec)
	}
	errs := make([]error, len(runs))
	for _, sidecars := range []bool{false, true} {
		var wg sync.WaitGroup
		for i, c := range runs {
			if !c.Running() || sidecar(c) != sidecars {
				continue
			}
			wg.Go(func() {
				errs[i] = a.killContainer(ctx, pod, c, g, "")
			})
		}
		wg.Wait()
	}
	return errors.Join(append(errs, a.stopPause(ctx, uid))...)
}

// killContainer runs c's preStop hook, then stops it; the hook's time
// counts against grace.
func (a *Agent) killContainer(ctx context.Context, pod *corev1.Pod, c *container, grace time.Duration, reason string) error {
	deadline := time.Now().Add(grace)
	if pod != nil {
		if msg := reason; msg != "" {
			a.event(pod, c.Spec.Name, corev1.EventTypeNormal, "Killing", msg)
		} else {
			a.event(pod, c.Spec.Name, corev1.EventTypeNormal, "Killing", "Stopping container "+c.Spec.Name)
		}
		if spec := specContainer(pod, c.Spec.Name); spec != nil && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
			hctx, cancel := context.WithDeadline(ctx, deadline)
			if err := a.runHandler(hctx, pod, c, spec.Lifecycle.PreStop); err != nil {
				a.event(pod, c.Spec.Name, corev1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %v", err))
			}
			cancel()
		}
	}
	return a.rt.stop(ctx, c, max(time.Until(deadline), 0))
}

// specContainer finds a container, init container or ephemeral container
// of the pod by name.
func specContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, c := range podContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// podContainers are the pod's init, regular and ephemeral containers, the
// last as the containers they are run as.
func podContainers(pod *corev1.Pod) []*corev1.Container {
	var all []*corev1.Container
	for i := range pod.Spec.InitContainers {
		all = append(all, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		all = append(all, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		all = append(all, (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return all
}

func (w *podWorker) setRunning(dirs []string) {
	w.mu.Lock()
	w.running = dirs
	w.mu.Unlock()
}

// event records an event about a pod's container.
func (a *Agent) event(pod *corev1.Pod, container, kind, reason, msg string) {
	ref := &corev1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
	if container != "" {
		ref.FieldPath = fmt.Sprintf("spec.containers{%s}", container)
		for _, c := range pod.Spec.InitContainers {
			if c.Name == container {
				ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", container)
			}
		}
		for _, c := range pod.Spec.EphemeralContainers {
			if c.Name == container {
				ref.FieldPath = fmt.Sprintf("spec.ephemeralContainers{%s}", container)
			}
		}
	}
	a.recorder.Event(ref, kind, reason, msg)
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

func (a *Agent) backoffKeys(pod *corev1.Pod) []string {
	if pod == nil {
		return nil
	}
	var keys []string
	for _, c := range podContainers(pod) {
		keys = append(keys, backoffKey(pod, c.Name))
	}
	return keys
}

func backoffKey(pod *corev1.Pod, name string) string {
	return string(pod.UID) + "/" + name
}
