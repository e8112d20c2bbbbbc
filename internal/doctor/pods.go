package doctor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/controller/endpointutil"
	"github.com/svcnet/svcnet/internal/controller/podstate"
)

// podProblem is why one selected pod is not a ready endpoint.
type podProblem struct {
	pod  *corev1.Pod
	code Code
	// clause follows "Pod NAME is"; advice is the sentence after it.
	clause, advice string
	// detail is the pod's evidence line.
	detail string
}

// servingPod says whether the EndpointSlice controller makes the pod a
// ready endpoint of svc: it has an IP, is not finished nor terminating,
// and is Ready (or the Service publishes not-ready addresses).
func servingPod(svc *corev1.Service, pod *corev1.Pod) bool {
	return endpointutil.HasEndpoint(pod, false) && (podstate.Ready(pod) || svc.Spec.PublishNotReadyAddresses)
}

// podsReady reports the selected pods that are not ready endpoints, one
// finding per reason: errors when no pod serves (with a summary first),
// warnings otherwise.
func (d *diagnosis) podsReady() error {
	svc := d.svc
	serving := 0
	var problems []*podProblem
	for _, p := range d.matched {
		if servingPod(svc, p) {
			serving++
			continue
		}
		pp, err := d.podProblem(p)
		if err != nil {
			return err
		}
		problems = append(problems, pp)
	}
	if len(problems) == 0 {
		return nil
	}
	sev := SeverityWarning
	if serving == 0 {
		sev = SeverityError
		names := podNames(d.matched)
		d.add(SeverityError, NoReadyPods, fmt.Sprintf(
			"The selector %s matches %s (%s), but none is Ready, so the Service has no ready endpoints and connections to it are refused. The findings below say why.",
			labels.Set(svc.Spec.Selector).String(), plural(len(d.matched), "pod", "pods"), nameList(names)),
			ev("selected pods", capped(names)))
	}
	var order []Code
	byCode := map[Code][]*podProblem{}
	for _, pp := range problems {
		if byCode[pp.code] == nil {
			order = append(order, pp.code)
		}
		byCode[pp.code] = append(byCode[pp.code], pp)
	}
	for _, code := range order {
		group := byCode[code]
		names := podNames(podsOf(group))
		subject := podsSubject(names) + " is"
		if len(names) > 1 {
			subject = podsSubject(names) + " are"
		}
		evidence := make([]Evidence, 0, min(len(group), maxEvidence+1))
		for i, pp := range group {
			if i == maxEvidence {
				evidence = append(evidence, ev("more pods", fmt.Sprint(len(group)-maxEvidence)))
				break
			}
			evidence = append(evidence, ev("pod "+pp.pod.Name, pp.detail))
		}
		s := sev
		if serving > 0 && (code == PodTerminating || code == PodFinished) {
			s = SeverityInfo
		}
		d.add(s, code, fmt.Sprintf("%s %s. %s", subject, group[0].clause, group[0].advice), evidence...)
	}
	return nil
}

// podsOf are the problems' pods.
func podsOf(problems []*podProblem) []*corev1.Pod {
	pods := make([]*corev1.Pod, len(problems))
	for i, pp := range problems {
		pods[i] = pp.pod
	}
	return pods
}

// podProblem says why a selected pod is not a ready endpoint, from what
// upstream publishes: deletion, phase, the PodScheduled condition,
// container statuses, the kubelet's Unhealthy events, the Ready condition.
func (d *diagnosis) podProblem(p *corev1.Pod) (*podProblem, error) {
	pp := &podProblem{pod: p}
	kubectl := fmt.Sprintf("kubectl describe pod -n %s %s", p.Namespace, p.Name)
	switch {
	case p.DeletionTimestamp != nil:
		pp.code = PodTerminating
		pp.clause = "terminating (deletion requested at " + p.DeletionTimestamp.UTC().Format(time.RFC3339) + ")"
		pp.advice = "A terminating pod is no longer a ready endpoint; if it stays, a finalizer or a container that ignores SIGTERM holds it."
		pp.detail = fmt.Sprintf("deletion requested at %s", p.DeletionTimestamp.UTC().Format(time.RFC3339))
		if g := p.DeletionGracePeriodSeconds; g != nil {
			pp.detail += fmt.Sprintf(", grace period %ds", *g)
		}
		if len(p.Finalizers) > 0 {
			pp.detail += ", finalizers " + strings.Join(p.Finalizers, ",")
		}
		return pp, nil
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		pp.code = PodFinished
		pp.clause = "finished (phase " + string(p.Status.Phase) + ")"
		pp.advice = "A finished pod is never an endpoint; the Service should select the pods of a long-running workload."
		pp.detail = joinNonEmpty(": ", "phase "+string(p.Status.Phase), p.Status.Reason, p.Status.Message)
		return pp, nil
	}
	if c := condition(p, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		pp.code = PodUnschedulable
		pp.clause = fmt.Sprintf("Pending: the scheduler cannot place it: %q", c.Message)
		pp.advice = "Add nodes or capacity, or relax the pod's resource requests, nodeSelector, affinity or tolerations."
		pp.detail = joinNonEmpty(": ", "PodScheduled=False", c.Reason, c.Message)
		return pp, nil
	}
	if p.Spec.NodeName == "" {
		pp.code = PodUnschedulable
		pp.clause = "Pending: no scheduler has placed it yet, and none says why"
		pp.advice = fmt.Sprintf("Check that the scheduler %q runs (svcnet's is part of the controller-manager).", cmp.Or(p.Spec.SchedulerName, corev1.DefaultSchedulerName))
		pp.detail = "no node and no PodScheduled condition, schedulerName " + cmp.Or(p.Spec.SchedulerName, corev1.DefaultSchedulerName)
		return pp, nil
	}
	statuses := append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			pp.code = PodCrashLooping
			pp.clause = "in CrashLoopBackOff: container " + cs.Name + " keeps exiting"
			detail := fmt.Sprintf("container %s: CrashLoopBackOff, %d restarts", cs.Name, cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				exit := fmt.Sprintf("exit code %d", t.ExitCode)
				if t.Reason != "" {
					exit += " (" + t.Reason + ")"
				}
				pp.clause = fmt.Sprintf("in CrashLoopBackOff: container %s last exited with %s and is restarted with back-off", cs.Name, exit)
				detail += ", last " + exit
				if t.Message != "" {
					detail += ": " + oneLine(t.Message)
				}
			}
			pp.advice = fmt.Sprintf("Read its last output with `kubectl logs -n %s %s -c %s --previous` and fix the command, its configuration or its liveness probe.", p.Namespace, p.Name, cs.Name)
			pp.detail = detail
			return pp, nil
		}
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			pp.code = PodContainerWaiting
			pp.clause = "not running: container " + cs.Name + " is waiting: " + w.Reason
			if w.Message != "" {
				pp.clause += fmt.Sprintf(" (%s)", oneLine(w.Message))
			}
			pp.advice = fmt.Sprintf("Fix what the reason names (the image or its registry credentials, a missing ConfigMap, Secret or volume); `%s` shows the events.", kubectl)
			pp.detail = joinNonEmpty(": ", "container "+cs.Name+" waiting", w.Reason, oneLine(w.Message))
			return pp, nil
		}
	}
	e, err := d.probeFailure(p)
	if err != nil {
		return nil, err
	}
	if e != nil {
		container := containerOf(e.InvolvedObject.FieldPath)
		kind, _, _ := strings.Cut(e.Message, " ")
		pp.code, pp.advice = ReadinessProbeFailing, "A pod that is not Ready gets no traffic: make the application pass the probe, or fix the probe's path, port or command."
		switch kind {
		case "Startup":
			pp.code, pp.advice = StartupProbeFailing, "Until its startup probe passes the container is not Ready: make the application start, or give the probe more time (failureThreshold × periodSeconds)."
		case "Liveness":
			pp.code, pp.advice = LivenessProbeFailing, "The kubelet restarts a container whose liveness probe fails, and it is not Ready meanwhile: fix the application or the probe."
		}
		probe := strings.ToLower(kind) + " probe"
		if container != "" {
			probe = "the " + probe + " of container " + container
		}
		pp.clause = fmt.Sprintf("not Ready: %s fails: %q", probe, e.Message)
		pp.detail = eventLine(e)
		return pp, nil
	}
	pp.code = PodNotReady
	pp.advice = fmt.Sprintf("A pod that is not Ready gets no traffic; `%s` shows its conditions and events.", kubectl)
	switch c := condition(p, corev1.PodReady); {
	case podstate.Ready(p):
		pp.clause = "Ready but has no IP yet"
		pp.detail = "Ready, no pod IP"
	case c != nil && (c.Reason != "" || c.Message != ""):
		pp.clause = "not Ready (" + joinNonEmpty(": ", c.Reason, c.Message) + ")"
		pp.detail = joinNonEmpty(": ", "Ready=False", c.Reason, c.Message)
	default:
		pp.clause = "not Ready yet, and no failing probe is recorded"
		pp.detail = "phase " + string(p.Status.Phase) + ", no Ready condition"
	}
	return pp, nil
}

// probeFailure is the pod's latest Warning event of reason Unhealthy, a
// readiness probe's if any.
func (d *diagnosis) probeFailure(p *corev1.Pod) (*corev1.Event, error) {
	events, err := d.eventsOf("Pod", p.Name, p.UID)
	if err != nil {
		return nil, err
	}
	var latest, readiness *corev1.Event
	for _, e := range events {
		if e.Type != corev1.EventTypeWarning || e.Reason != "Unhealthy" {
			continue
		}
		if latest == nil {
			latest = e
		}
		if readiness == nil && strings.HasPrefix(e.Message, "Readiness") {
			readiness = e
		}
	}
	return cmp.Or(readiness, latest), nil
}

// condition is the pod's condition of type t, nil without one.
func condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// containerOf is the container an event's fieldPath names
// ("spec.containers{web}" → "web"), "" for none.
func containerOf(fieldPath string) string {
	_, rest, ok := strings.Cut(fieldPath, "{")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "}")
	return name
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), sep)
}

// oneLine is s on one line, shortened to 200 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// eventsOf are the namespace's events about one object (kind, name and,
// when both know it, UID), the latest first. The namespace's events are
// listed once, on first use.
func (d *diagnosis) eventsOf(kind, name string, uid types.UID) ([]*corev1.Event, error) {
	if !d.loaded {
		list, err := d.client.CoreV1().Events(d.svc.Namespace).List(d.ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list events in namespace %s: %w", d.svc.Namespace, err)
		}
		d.events, d.loaded = list.Items, true
	}
	var out []*corev1.Event
	for i := range d.events {
		e := &d.events[i]
		o := e.InvolvedObject
		if o.Kind == kind && o.Name == name && (o.UID == "" || uid == "" || o.UID == uid) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b *corev1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	return out, nil
}

// eventTime is when an event was last seen.
func eventTime(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = cmp.Or(e.FirstTimestamp.Time, e.CreationTimestamp.Time)
	}
	return t
}

// eventLine is an event as kubectl describe shows it, on one line.
func eventLine(e *corev1.Event) string {
	count := e.Count
	if e.Series != nil {
		count = max(count, e.Series.Count)
	}
	line := fmt.Sprintf("%s %s: %s", e.Type, e.Reason, oneLine(e.Message))
	var when []string
	if count > 1 {
		when = append(when, fmt.Sprintf("%d times", count))
	}
	if t := eventTime(e); !t.IsZero() {
		when = append(when, "last at "+t.UTC().Format(time.RFC3339))
	}
	if src := cmp.Or(e.Source.Component, e.ReportingController); src != "" {
		when = append(when, "from "+src)
	}
	if len(when) > 0 {
		line += " (" + strings.Join(when, ", ") + ")"
	}
	return line
}
