package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/fsstats"
)

// Local ephemeral storage eviction, as the kubelet's eviction manager does
// it each housekeeping interval: a pod whose emptyDir outgrows its
// sizeLimit, whose local storage (its containers' writable layers and
// logs, its emptyDirs on disk) outgrows the sum of its containers'
// ephemeral-storage limits, or whose container's own usage outgrows that
// container's limit, is evicted: its containers are killed at once and it
// ends Failed, reason Evicted, with the kubelet's message, a
// DisruptionTarget condition and an Evicted event.

// evictionInterval is the kubelet's housekeeping interval.
const evictionInterval = 10 * time.Second

// The kubelet's eviction messages.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// watchLocalStorage checks the running pods' local storage every
// evictionInterval until ctx ends, and has the workers of those over
// their limits evict them.
func (a *Agent) watchLocalStorage(ctx context.Context) {
	t := time.NewTicker(evictionInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, w := range a.podWorkers() {
			pod, gone := w.snapshot()
			if gone || pod == nil || pod.DeletionTimestamp != nil || podTerminal(pod) {
				continue
			}
			if msg := a.localStorageExceeded(pod); msg != "" {
				w.mu.Lock()
				w.end = &podEnd{reason: "Evicted", message: msg, disruption: true}
				w.mu.Unlock()
				w.poke()
			}
		}
	}
}

// podTerminal reports a pod that has Succeeded or Failed.
func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// localStorageExceeded is the eviction message for a pod over one of its
// local storage limits, in the eviction manager's order; empty if none.
func (a *Agent) localStorageExceeded(pod *corev1.Pod) string {
	var total int64
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		s, err := fsstats.Measure(a.volumeDir(pod.UID, pluginEmptyDir, v.Name))
		if err != nil {
			continue
		}
		if v.EmptyDir.SizeLimit != nil && s.UsedBytes > uint64(v.EmptyDir.SizeLimit.Value()) {
			return fmt.Sprintf(emptyDirMessageFmt, v.Name, v.EmptyDir.SizeLimit.String())
		}
		total += int64(s.UsedBytes)
	}
	runs, err := a.rt.containers(string(pod.UID))
	if err != nil {
		return ""
	}
	latest := latestRuns(runs)
	used := map[string]int64{}
	podLimit := resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		if lim, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			podLimit.Add(lim)
		}
		if run := latest[c.Name]; run != nil && run.Running() {
			used[c.Name] = containerDiskUsage(run)
			total += used[c.Name]
		}
	}
	if !podLimit.IsZero() && total > podLimit.Value() {
		return fmt.Sprintf(podEphemeralStorageMessageFmt, podLimit.String())
	}
	for _, c := range pod.Spec.Containers {
		if lim, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && used[c.Name] > lim.Value() {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, lim.String())
		}
	}
	return ""
}

// containerDiskUsage is what a run holds on the node's disk: its writable
// layer (a container of an image) and its log.
func containerDiskUsage(c *container) int64 {
	var n int64
	if s, err := fsstats.Measure(filepath.Join(c.dir, "upper")); err == nil {
		n += int64(s.UsedBytes)
	}
	for _, f := range []string{c.Spec.Log, c.Spec.Log + ".1"} {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// podEnd is how the kubelet ends a running pod itself: its status
// reason and message (and event), and whether it is a disruption (an
// eviction) that the DisruptionTarget condition records.
type podEnd struct {
	reason, message string
	disruption      bool
}

// deadlineExceededMessage is the kubelet's for a pod past its
// activeDeadlineSeconds.
const deadlineExceededMessage = "Pod was active on the node longer than the specified deadline"

// activeDeadlineLeft is the time left of the pod's activeDeadlineSeconds,
// counted from its start on the node; set reports whether it has one.
func activeDeadlineLeft(pod *corev1.Pod, now time.Time) (left time.Duration, set bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || pod.Status.StartTime == nil {
		return 0, false
	}
	end := pod.Status.StartTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
	return end.Sub(now), true
}

// endPod kills the pod's containers at once and records why, as the
// kubelet's eviction manager and active deadline handler do.
func (a *Agent) endPod(ctx context.Context, pod *corev1.Pod, end *podEnd) error {
	uid := string(pod.UID)
	a.event(pod, "", corev1.EventTypeWarning, end.reason, end.message)
	var now time.Duration
	if err := a.killContainers(ctx, uid, pod, &now); err != nil {
		return err
	}
	runs, err := a.rt.containers(uid)
	if err != nil {
		return err
	}
	st := a.podStatus(pod, runs, nil, false)
	st.Phase, st.Reason, st.Message = corev1.PodFailed, end.reason, end.message
	if end.disruption {
		cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
			Message: end.message, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
		if c := findCondition(st.Conditions, corev1.DisruptionTarget); c != nil {
			*c = cond
		} else {
			st.Conditions = append(st.Conditions, cond)
		}
	}
	return errors.Join(a.updateStatus(ctx, pod, st), a.net.Teardown(uid))
}
