package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podStatus computes the pod's status from its container runs as the
// kubelet does: container states, readiness, phase and conditions.
// terminating marks a pod whose containers have all been stopped for
// deletion.
func (a *Agent) podStatus(pod *corev1.Pod, runs []*container, waiting map[string]waitReason, terminating bool) corev1.PodStatus {
	old := pod.Status
	st := corev1.PodStatus{
		QOSClass:          old.QOSClass,
		NominatedNodeName: old.NominatedNodeName,
		PodIP:             old.PodIP,
		PodIPs:            old.PodIPs,
		StartTime:         old.StartTime,
		HostIP:            a.nodeIP.String(),
		HostIPs:           []corev1.HostIP{{IP: a.nodeIP.String()}},
		// The generation of the spec this status was made from.
		ObservedGeneration: pod.Generation,
	}
	if podTerminal(pod) {
		// Why it ended (Evicted and the eviction's message) stays.
		st.Reason, st.Message = old.Reason, old.Message
	}
	if st.StartTime == nil {
		st.StartTime = ptr.To(metav1.NewTime(time.Now().Truncate(time.Second)))
	}
	byName := map[string][]*container{}
	for _, c := range runs {
		byName[c.Spec.Name] = append(byName[c.Spec.Name], c)
	}

	// Init containers: done, failed, or the one in progress; a sidecar
	// (restartable) is done once started, and counts for readiness.
	initDone, initFailed := true, false
	initialized := slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return len(byName[c.Name]) > 0 })
	var pendingInit, unready []string
	for i, spec := range pod.Spec.InitContainers {
		cs := a.containerStatus(&pod.Spec.InitContainers[i], byName[spec.Name], waiting, oldStatus(old.InitContainerStatuses, spec.Name))
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" && !initDone {
			cs.State.Waiting.Reason = "PodInitializing"
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
		if isSidecar(&pod.Spec.InitContainers[i]) {
			if !cs.Ready {
				unready = append(unready, spec.Name)
			}
			if initialized || (cs.State.Running != nil && ptr.Deref(cs.Started, false)) {
				continue
			}
			initDone = false
			pendingInit = append(pendingInit, spec.Name)
			continue
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			// An init container that succeeded is ready, as the kubelet
			// reports it.
			st.InitContainerStatuses[i].Ready = true
			continue
		}
		if t := cs.State.Terminated; t != nil && pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
			initFailed = true
		}
		initDone = false
		pendingInit = append(pendingInit, spec.Name)
	}

	running, waitingN, stopped, succeeded := 0, 0, 0, 0
	for i, spec := range pod.Spec.Containers {
		cs := a.containerStatus(&pod.Spec.Containers[i], byName[spec.Name], waiting, oldStatus(old.ContainerStatuses, spec.Name))
		if !initDone && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" {
			cs.State.Waiting.Reason = "PodInitializing"
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			unready = append(unready, spec.Name)
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waitingN++
		}
	}

	// Ephemeral containers count neither for the phase nor for readiness.
	for i, spec := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses,
			a.containerStatus(c, byName[spec.Name], waiting, oldStatus(old.EphemeralContainerStatuses, spec.Name)))
	}

	switch {
	case old.Phase == corev1.PodSucceeded || old.Phase == corev1.PodFailed:
		st.Phase = old.Phase
	case initFailed:
		st.Phase = corev1.PodFailed
	case !initDone:
		st.Phase = corev1.PodPending
	case terminating && running == 0:
		st.Phase = corev1.PodFailed
		if stopped == succeeded && stopped == len(pod.Spec.Containers) {
			st.Phase = corev1.PodSucceeded
		}
	case waitingN > 0:
		st.Phase = corev1.PodPending
	case running > 0:
		st.Phase = corev1.PodRunning
	case stopped > 0:
		st.Phase = stoppedPhase(pod.Spec.RestartPolicy, stopped, succeeded)
	default:
		st.Phase = corev1.PodPending
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed

	now := metav1.NewTime(time.Now().Truncate(time.Second))
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, ObservedGeneration: pod.Generation, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, "", ""
			if terminal && reason == "PodCompleted" {
				c.Reason = reason
			}
		}
		if prev := findCondition(old.Conditions, t); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		st.Conditions = append(st.Conditions, c)
	}
	cond(corev1.PodReadyToStartContainers, !terminal && !terminating, "", "")
	switch {
	case terminal && !initFailed:
		cond(corev1.PodInitialized, true, "PodCompleted", "")
	case initDone:
		cond(corev1.PodInitialized, true, "", "")
	default:
		cond(corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(pendingInit, " ")))
	}
	ready := len(unready) == 0 && initDone && !terminal
	notReadyReason, notReadyMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if terminal {
		notReadyReason, notReadyMsg = "PodCompleted", ""
	}
	cond(corev1.ContainersReady, ready, notReadyReason, notReadyMsg)
	gatesOK, gateMsg := readinessGates(pod, old.Conditions)
	if ready && !gatesOK {
		cond(corev1.PodReady, false, "ReadinessGatesNotReady", gateMsg)
	} else {
		cond(corev1.PodReady, ready, notReadyReason, notReadyMsg)
	}
	if c := findCondition(old.Conditions, corev1.PodScheduled); c != nil {
		st.Conditions = append(st.Conditions, *c)
	} else {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	// Conditions others own (DisruptionTarget, readiness gates) stay.
	for _, c := range old.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled,
			corev1.PodResizePending, corev1.PodResizeInProgress:
		default:
			st.Conditions = append(st.Conditions, c)
		}
	}
	return st
}

// stoppedPhase is the phase of a pod whose containers have all stopped.
func stoppedPhase(policy corev1.RestartPolicy, stopped, succeeded int) corev1.PodPhase {
	switch policy {
	case corev1.RestartPolicyAlways:
		return corev1.PodRunning
	case corev1.RestartPolicyOnFailure:
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodRunning
	}
	if stopped == succeeded {
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

func readinessGates(pod *corev1.Pod, conds []corev1.PodCondition) (bool, string) {
	var missing []string
	for _, g := range pod.Spec.ReadinessGates {
		c := findCondition(conds, g.ConditionType)
		if c == nil {
			missing = append(missing, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		} else if c.Status != corev1.ConditionTrue {
			missing = append(missing, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, c.Status))
		}
	}
	return len(missing) == 0, strings.Join(missing, ", ")
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func oldStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// containerStatus reports one container from its runs (oldest first).
func (a *Agent) containerStatus(spec *corev1.Container, runs []*container, waiting map[string]waitReason, old *corev1.ContainerStatus) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: spec.Name, Image: imageRef(spec.Image), Started: ptr.To(false)}
	var cur, prev *container
	if n := len(runs); n > 0 {
		cur = runs[n-1]
		if n > 1 {
			prev = runs[n-2]
		}
		cs.RestartCount = int32(cur.Spec.Attempt)
		cs.ImageID = cur.Spec.ImageRef
		cs.ContainerID = containerIDPrefix + cur.Spec.ID
	}
	wr, isWaiting := waiting[spec.Name]
	switch {
	case cur == nil:
		if !isWaiting {
			wr = waitReason{reason: "ContainerCreating"}
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wr.reason, Message: wr.message}
		if old != nil {
			// A container that never ran keeps no ID; its last state stays.
			cs.LastTerminationState = old.LastTerminationState
		}
	case cur.Running():
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metaTime(cur.State.StartedAt)}
		if r := cur.Spec.Resources; r != nil {
			// What the run has (its allocation, applied), not what the
			// spec may ask since.
			cs.AllocatedResources, cs.Resources = r.Requests, r.DeepCopy()
		}
		started, ready := a.probes.state(cur, spec)
		cs.Started, cs.Ready = ptr.To(started), ready
		if prev != nil && prev.Exit != nil {
			cs.LastTerminationState.Terminated = terminated(prev)
		}
	case isWaiting:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: wr.reason, Message: wr.message}
		cs.LastTerminationState.Terminated = terminated(cur)
	default:
		cs.State.Terminated = terminated(cur)
		if prev != nil && prev.Exit != nil {
			cs.LastTerminationState.Terminated = terminated(prev)
		}
	}
	return cs
}

// containerIDPrefix is the runtime's name in container IDs.
const containerIDPrefix = "svcnet://"

func terminated(c *container) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{
		ExitCode:    c.Exit.ExitCode,
		Signal:      c.Exit.Signal,
		Reason:      c.Exit.Reason,
		Message:     c.Exit.Message,
		FinishedAt:  metaTime(c.Exit.FinishedAt),
		ContainerID: containerIDPrefix + c.Spec.ID,
	}
	if c.State != nil {
		t.StartedAt = metaTime(c.State.StartedAt)
	}
	return t
}

// metaTime is t as the API keeps it, to the second, so that a computed
// status compares equal to the stored one.
func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

// updateStatus writes st as the pod's status unless it is already so.
func (a *Agent) updateStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) error {
	if apiequality.Semantic.DeepEqual(pod.Status, st) {
		return nil
	}
	p := pod.DeepCopy()
	p.Status = st
	_, err := a.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		fresh, gerr := a.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("get pod %s: %w", klogRef(pod), gerr)
		}
		if fresh.UID != pod.UID {
			return nil
		}
		fresh.Status = st
		_, err = a.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("update status of pod %s: %w", klogRef(pod), err)
	}
	return nil
}
