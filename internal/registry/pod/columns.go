package pod

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// nodeLostReason is the pod reason the node lifecycle controller sets when
// the pod's node stopped reporting.
const nodeLostReason = "NodeLost"

func columns() []registry.Column {
	cell := func(f func(*corev1.Pod) interface{}) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} { return f(o.(*corev1.Pod)) }
	}
	orNone := func(s string) interface{} {
		if s == "" {
			return "<none>"
		}
		return s
	}
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Ready", Type: "string",
			Description: "The aggregate readiness state of this pod for accepting traffic."},
			Cell: cell(func(p *corev1.Pod) interface{} { s := summarize(p); return fmt.Sprintf("%d/%d", s.ready, s.total) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Status", Type: "string",
			Description: "The aggregate status of the containers in this pod."},
			Cell: cell(func(p *corev1.Pod) interface{} { return summarize(p).reason })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Restarts", Type: "string",
			Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
			Cell: cell(func(p *corev1.Pod) interface{} {
				s := summarize(p)
				if s.restarts != 0 && !s.lastRestart.IsZero() {
					return fmt.Sprintf("%d (%s ago)", s.restarts, registry.Age(s.lastRestart))
				}
				return strconv.Itoa(s.restarts)
			})},
		registry.AgeColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "IP", Type: "string", Priority: 1,
			Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
			Cell: cell(func(p *corev1.Pod) interface{} {
				if len(p.Status.PodIPs) == 0 {
					return "<none>"
				}
				return orNone(p.Status.PodIPs[0].IP)
			})},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Node", Type: "string", Priority: 1,
			Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
			Cell: cell(func(p *corev1.Pod) interface{} { return orNone(p.Spec.NodeName) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Nominated Node", Type: "string", Priority: 1,
			Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
			Cell: cell(func(p *corev1.Pod) interface{} { return orNone(p.Status.NominatedNodeName) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Readiness Gates", Type: "string", Priority: 1,
			Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
			Cell: cell(readinessGates)},
	}
}

// summary is what the READY, STATUS and RESTARTS cells show.
type summary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  metav1.Time
}

// summarize follows upstream's printPod: the phase (or reason), overridden
// by init container progress, then by the last container with a waiting or
// terminated reason; sidecars count as containers once started.
func summarize(pod *corev1.Pod) summary {
	s := summary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}
	inits := map[string]*corev1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		inits[c.Name] = c
		if validate.IsSidecar(c) {
			s.total++
		}
	}

	sidecarRestarts, lastSidecarRestart := 0, metav1.Time{}
	initializing := false
	for i, st := range pod.Status.InitContainerStatuses {
		s.restarts += int(st.RestartCount)
		noteRestart(&s.lastRestart, st)
		sidecar := validate.IsSidecar(inits[st.Name])
		if sidecar {
			sidecarRestarts += int(st.RestartCount)
			noteRestart(&lastSidecarRestart, st)
		}
		switch {
		case st.State.Terminated != nil && st.State.Terminated.ExitCode == 0:
			continue
		case sidecar && st.Started != nil && *st.Started:
			if st.Ready {
				s.ready++
			}
			continue
		case st.State.Terminated != nil:
			t := st.State.Terminated
			switch {
			case t.Reason != "":
				s.reason = "Init:" + t.Reason
			case t.Signal != 0:
				s.reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				s.reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + st.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || hasCondition(pod, corev1.PodInitialized) {
		s.restarts, s.lastRestart = sidecarRestarts, lastSidecarRestart
		running := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			st := pod.Status.ContainerStatuses[i]
			s.restarts += int(st.RestartCount)
			noteRestart(&s.lastRestart, st)
			switch {
			case st.State.Waiting != nil && st.State.Waiting.Reason != "":
				s.reason = st.State.Waiting.Reason
			case st.State.Terminated != nil && st.State.Terminated.Reason != "":
				s.reason = st.State.Terminated.Reason
			case st.State.Terminated != nil && st.State.Terminated.Signal != 0:
				s.reason = fmt.Sprintf("Signal:%d", st.State.Terminated.Signal)
			case st.State.Terminated != nil:
				s.reason = fmt.Sprintf("ExitCode:%d", st.State.Terminated.ExitCode)
			case st.Ready && st.State.Running != nil:
				running = true
				s.ready++
			}
		}
		if s.reason == "Completed" && running {
			s.reason = "NotReady"
			if hasCondition(pod, corev1.PodReady) {
				s.reason = "Running"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == nodeLostReason {
			s.reason = "Unknown"
		} else if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			s.reason = "Terminating"
		}
	}
	return s
}

// noteRestart keeps the latest finish time of a container's last run.
func noteRestart(latest *metav1.Time, st corev1.ContainerStatus) {
	if t := st.LastTerminationState.Terminated; t != nil && latest.Before(&t.FinishedAt) {
		*latest = t.FinishedAt
	}
}

// hasCondition reports whether the first condition of that type is true.
func hasCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readinessGates(pod *corev1.Pod) interface{} {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ready := 0
	for _, gate := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType {
				if c.Status == corev1.ConditionTrue {
					ready++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(pod.Spec.ReadinessGates))
}
