package job

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// noIndex is the index of a pod without a valid completion index.
const noIndex = -1

// indexOf is a pod's completion index, from its annotation; noIndex when
// it has none or one outside [0, completions).
func indexOf(pod *corev1.Pod, completions int32) int {
	v, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= int(completions) {
		return noIndex
	}
	return i
}

// parseIndexes reads an index list ("1,3-5") as stored in
// status.completedIndexes, skipping what does not parse or lies beyond
// completions, as upstream does with a list written before a scale-down.
func parseIndexes(s string, completions int32) sets.Set[int] {
	out := sets.New[int]()
	if s == "" {
		return out
	}
	for _, part := range strings.Split(s, ",") {
		first, last, found := strings.Cut(part, "-")
		x, err := strconv.Atoi(first)
		if err != nil {
			continue
		}
		y := x
		if found {
			if y, err = strconv.Atoi(last); err != nil {
				continue
			}
		}
		for i := x; i <= y && i < int(completions); i++ {
			out.Insert(i)
		}
	}
	return out
}

// formatIndexes writes indexes as ordered intervals: "0,2-4,6,7".
func formatIndexes(indexes sets.Set[int]) string {
	sorted := sets.List(indexes)
	var parts []string
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		switch j - i {
		case 0:
			parts = append(parts, strconv.Itoa(sorted[i]))
		case 1: // a pair is two items, as upstream writes it
			parts = append(parts, strconv.Itoa(sorted[i]), strconv.Itoa(sorted[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", sorted[i], sorted[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// missingIndexes are the n lowest indexes below completions neither
// succeeded nor held by an active pod.
func missingIndexes(completions int32, succeeded, active sets.Set[int], n int) []int {
	var out []int
	for i := 0; i < int(completions) && len(out) < n; i++ {
		if !succeeded.Has(i) && !active.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// matchSuccessPolicy reports the first rule of the policy that the
// succeeded indexes meet, with upstream's message.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, succeeded sets.Set[int]) (string, bool) {
	if policy == nil || succeeded.Len() == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		met := false
		if rule.SucceededIndexes != nil {
			required := parseIndexes(*rule.SucceededIndexes, completions)
			if required.Len() == 0 {
				continue
			}
			have := required.Intersection(succeeded).Len()
			met = have == required.Len() || (rule.SucceededCount != nil && have >= int(*rule.SucceededCount))
		} else if rule.SucceededCount != nil {
			met = succeeded.Len() >= int(*rule.SucceededCount)
		}
		if met {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// matchPodFailurePolicy applies the job's pod failure policy to a failed
// pod: the action of the first rule it matches ("" when none does, which
// counts the failure as Count does) and, for FailJob, upstream's message.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) (batchv1.PodFailurePolicyAction, string) {
	if policy == nil {
		return "", ""
	}
	for i, rule := range policy.Rules {
		var msg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			msg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			c := matchPodConditions(&pod.Status, rule.OnPodConditions)
			if c == nil {
				continue
			}
			msg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d", pod.Namespace, pod.Name, c.Type, rule.Action, i)
		default:
			continue
		}
		if rule.Action != batchv1.PodFailurePolicyActionFailJob {
			msg = ""
		}
		return rule.Action, msg
	}
	return "", ""
}

// failureCounts says whether a failed pod counts against the job's
// backoff limits: every failure does but those an Ignore rule matches.
func failureCounts(job *batchv1.Job, pod *corev1.Pod) bool {
	action, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
	return action != batchv1.PodFailurePolicyActionIgnore
}

func matchExitCodes(st *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

func matchPodConditions(st *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range st.Conditions {
		for _, p := range patterns {
			if st.Conditions[i].Type == p.Type && st.Conditions[i].Status == p.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}
