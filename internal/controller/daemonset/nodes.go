package daemonset

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/controller/controllerref"
	"github.com/svcnet/svcnet/internal/registry/daemonset"
)

// templateGenerationLabel is upstream's pod-template-generation: the
// DaemonSet's template generation a pod was made from.
const templateGenerationLabel = "pod-template-generation"

// defaultTolerations are upstream's AddOrUpdateDaemonPodTolerations: daemon
// pods stay through node problems and go where nodes are under pressure or
// cordoned; host-network pods also where the network is not set up yet.
func defaultTolerations(hostNetwork bool) []corev1.Toleration {
	exists := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	out := []corev1.Toleration{
		exists(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		exists(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		exists(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	if hostNetwork {
		out = append(out, exists(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
	}
	return out
}

// withDefaultTolerations adds the default tolerations the spec does not
// hold already.
func withDefaultTolerations(spec *corev1.PodSpec) {
	for _, t := range defaultTolerations(spec.HostNetwork) {
		found := false
		for i := range spec.Tolerations {
			found = found || equality.Semantic.DeepEqual(spec.Tolerations[i], t)
		}
		if !found {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// placement decides, as upstream's NodeShouldRunDaemonPod, where a
// DaemonSet's pods run; it is built once per sync.
type placement struct {
	nodeName    string
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
}

func placementOf(ds *appsv1.DaemonSet) placement {
	spec := ds.Spec.Template.Spec.DeepCopy()
	withDefaultTolerations(spec)
	return placement{nodeName: spec.NodeName, tolerations: spec.Tolerations,
		affinity: nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)}
}

// shouldRun says whether a daemon pod belongs on node (its selector,
// affinity and the NoSchedule and NoExecute taints allow it), and whether
// one already there may stay (no untolerated NoExecute taint).
func (p placement) shouldRun(node *corev1.Node) (run, keep bool) {
	if p.nodeName != "" && p.nodeName != node.Name {
		return false, false
	}
	if ok, _ := p.affinity.Match(node); !ok {
		return false, false
	}
	untolerated := func(effects ...corev1.TaintEffect) bool {
		_, found := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.tolerations, func(t *corev1.Taint) bool {
			return sets.New(effects...).Has(t.Effect)
		}, false)
		return found
	}
	if untolerated(corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) {
		return false, !untolerated(corev1.TaintEffectNoExecute)
	}
	return true, true
}

// newPod is the DaemonSet's pod for node: the template with the revision's
// hash and template generation as labels, the default tolerations, and
// its required node affinity replaced by the node's name, for the
// scheduler to bind it there (upstream's
// ReplaceDaemonSetPodNodeNameNodeAffinity).
func newPod(ds *appsv1.DaemonSet, hash, node string) *corev1.Pod {
	pod := controllerref.NewPod(ds, kind, &ds.Spec.Template)
	pod.GenerateName = ds.Name + "-"
	if len(validation.NameIsDNSSubdomain(pod.GenerateName, true)) != 0 {
		pod.GenerateName = ds.Name
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	pod.Labels[templateGenerationLabel] = strconv.FormatInt(daemonset.TemplateGeneration(ds), 10)
	withDefaultTolerations(&pod.Spec)
	term := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
	return pod
}

// targetNode is the node a daemon pod is for: its spec.nodeName once bound,
// else the one its metadata.name node affinity names (upstream's
// GetTargetNodeName).
func targetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return ""
}

// updated says whether pod is of the DaemonSet's current template: its
// hash, or (for pods older than hashes) its template generation.
func updated(ds *appsv1.DaemonSet, pod *corev1.Pod, hash string) bool {
	if h, ok := pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; ok {
		return h == hash
	}
	return pod.Labels[templateGenerationLabel] == strconv.FormatInt(daemonset.TemplateGeneration(ds), 10)
}
