package node

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/podutil"
)

// The node admits each pod new to it before it runs anything of it, as
// the kubelet's predicate admission: against the Node's labels, taints and
// allocatable resources and the pods it admitted before that still run, it
// checks what the scheduler checks (a pod bound by hand has met no
// scheduler): the required node affinity and selector, NoExecute taints
// the pod does not tolerate, free host ports, and the room left for its
// requests and one more pod. A pod that does not fit fails with the
// kubelet's reason (NodePorts, OutOfcpu, ...) and "Pod was rejected: "
// message, and a Warning event; nothing of it runs. The check and the
// admission of a pod are one step under admitMu, so two pods wanting one
// port are never both admitted.

// admission is why a pod was not admitted.
type admission struct{ reason, message string }

// Upstream's predicate names and reasons.
const (
	predicateNodeAffinity    = "NodeAffinity"
	predicateNodePorts       = "NodePorts"
	predicateTaintToleration = "TaintToleration"
	reasonNodeAffinity       = "node(s) didn't match Pod's node affinity/selector"
	reasonNodePorts          = "node(s) didn't have free ports for the requested pod ports"
	reasonTaints             = "node(s) had taints that the pod didn't tolerate"
)

// admit admits w's pod, or says why not. A pod that started on the node
// before (the agent restarted) was admitted then.
func (a *Agent) admit(w *podWorker, pod *corev1.Pod) *admission {
	a.admitMu.Lock()
	defer a.admitMu.Unlock()
	w.mu.Lock()
	admitted := w.admitted
	w.mu.Unlock()
	if admitted || pod.Status.StartTime != nil {
		w.setAdmitted()
		return nil
	}
	node, err := a.nodeLister.Get(a.cfg.NodeName)
	if err != nil {
		// Not registered yet: nothing to check against.
		slog.Info("node: admitting a pod before the Node is known", "pod", klogRef(pod), "err", err)
		w.setAdmitted()
		return nil
	}
	if rej := admissionCheck(pod, node, a.admittedPods(w)); rej != nil {
		return rej
	}
	w.setAdmitted()
	return nil
}

func (w *podWorker) setAdmitted() {
	w.mu.Lock()
	w.admitted = true
	w.mu.Unlock()
}

// admittedPods are the pods of the node's other workers that were
// admitted and have not finished.
func (a *Agent) admittedPods(except *podWorker) []*corev1.Pod {
	a.mu.Lock()
	workers := make([]*podWorker, 0, len(a.workers))
	for _, w := range a.workers {
		if w != except {
			workers = append(workers, w)
		}
	}
	a.mu.Unlock()
	var out []*corev1.Pod
	for _, w := range workers {
		w.mu.Lock()
		pod, ok := w.pod, w.admitted && !w.gone && !w.ended
		w.mu.Unlock()
		if ok && pod != nil && !podTerminal(pod) && pod.DeletionTimestamp == nil {
			out = append(out, pod)
		}
	}
	return out
}

// admissionCheck is the kubelet's GeneralPredicates for pod on node, next
// to the pods admitted there: the first reason it does not fit, nil if it
// does.
func admissionCheck(pod *corev1.Pod, node *corev1.Node, others []*corev1.Pod) *admission {
	if rej := resourcesFit(pod, node, others); rej != nil {
		return rej
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return predicateFailure(predicateNodeAffinity, reasonNodeAffinity)
	}
	if hostPortsTaken(pod, others) {
		return predicateFailure(predicateNodePorts, reasonNodePorts)
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }, false)
	if untolerated {
		return predicateFailure(predicateTaintToleration, reasonTaints)
	}
	return nil
}

func predicateFailure(name, reason string) *admission {
	return &admission{reason: name, message: fmt.Sprintf("Predicate %s failed: %s", name, reason)}
}

// resourcesFit is NodeResourcesFit on the node's allocatable: one more
// pod, then the pod's cpu and memory requests.
func resourcesFit(pod *corev1.Pod, node *corev1.Node, others []*corev1.Pod) *admission {
	alloc := node.Status.Allocatable
	insufficient := func(name corev1.ResourceName, reason string, requested, used, capacity int64) *admission {
		return &admission{reason: reason, message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity)}
	}
	if pods, ok := alloc[corev1.ResourcePods]; ok && int64(len(others))+1 > pods.Value() {
		return insufficient(corev1.ResourcePods, "OutOfpods", 1, int64(len(others)), pods.Value())
	}
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	used := corev1.ResourceList{}
	for _, p := range others {
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for _, c := range []struct {
		name   corev1.ResourceName
		reason string
	}{{corev1.ResourceCPU, "OutOfcpu"}, {corev1.ResourceMemory, "OutOfmemory"}} {
		q, ok := want[c.name]
		capacity, known := alloc[c.name]
		if !ok || !known || q.IsZero() {
			continue
		}
		u := used[c.name]
		if r, have, cap := quantityValue(c.name, q), quantityValue(c.name, u), quantityValue(c.name, capacity); r > cap-have {
			return insufficient(c.name, c.reason, r, have, cap)
		}
	}
	return nil
}

// hostPortsTaken says whether a host port of the pod is another's.
func hostPortsTaken(pod *corev1.Pod, others []*corev1.Pod) bool {
	want := podutil.HostPorts(pod)
	for _, o := range others {
		for _, have := range podutil.HostPorts(o) {
			for _, w := range want {
				if w.Conflicts(have) {
					return true
				}
			}
		}
	}
	return false
}

// rejectPod fails a pod the node did not admit, as the kubelet's
// rejectPod: a Warning event and a status of the phase, reason and
// message alone.
func (a *Agent) rejectPod(ctx context.Context, pod *corev1.Pod, rej *admission) error {
	a.event(pod, "", corev1.EventTypeWarning, rej.reason, rej.message)
	return a.updateStatus(ctx, pod, corev1.PodStatus{QOSClass: pod.Status.QOSClass, Phase: corev1.PodFailed,
		Reason: rej.reason, Message: "Pod was rejected: " + rej.message})
}
