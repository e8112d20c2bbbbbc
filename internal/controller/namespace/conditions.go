package namespace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// conditionTypes are the namespace conditions this controller maintains,
// each with upstream's reason and message when all is well.
var conditionTypes = []struct {
	t               corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentRemoved", "All content successfully removed"},
}

// conditions collects the failures of one pass over a namespace's content.
type conditions struct {
	failed       []corev1.NamespaceCondition
	deleteErrors []string
}

func (c *conditions) add(t corev1.NamespaceConditionType, reason, message string) {
	c.failed = append(c.failed, corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message})
}

func (c *conditions) discoveryFailed(err error) {
	msg := err.Error()
	var partial *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &partial) {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(partial.Groups), err)
	}
	c.add(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
}

func (c *conditions) groupVersionFailed(err error) {
	c.add(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error())
}

func (c *conditions) deleteFailed(err error) { c.deleteErrors = append(c.deleteErrors, err.Error()) }

// remaining reports the objects and finalizers still in the namespace.
func (c *conditions) remaining(resources map[schema.GroupResource]int, finalizers map[string]int) {
	if len(resources) > 0 {
		var parts []string
		for gr, n := range resources {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gr.Resource, gr.Group, n))
		}
		sort.Strings(parts)
		c.add(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(parts, ", "))
	}
	if len(finalizers) > 0 {
		var parts []string
		for f, n := range finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		c.add(corev1.NamespaceFinalizersRemaining, "SomeFinalizerRemain", "Some finalizers are remaining: "+strings.Join(parts, ", "))
	}
}

// apply writes the conditions into status, each type either failed or
// with its all-well values, and says whether anything changed.
func (c *conditions) apply(status *corev1.NamespaceStatus) bool {
	if len(c.deleteErrors) > 0 {
		sort.Strings(c.deleteErrors)
		c.add(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(c.deleteErrors), strings.Join(c.deleteErrors, ", ")))
	}
	changed := false
	now := metav1.Now()
	for _, ct := range conditionTypes {
		want := corev1.NamespaceCondition{Type: ct.t, Status: corev1.ConditionFalse, Reason: ct.reason, Message: ct.message}
		for _, f := range c.failed {
			if f.Type == ct.t {
				want = f
			}
		}
		i := -1
		for j := range status.Conditions {
			if status.Conditions[j].Type == ct.t {
				i = j
			}
		}
		switch {
		case i < 0:
			want.LastTransitionTime = now
			status.Conditions = append(status.Conditions, want)
			changed = true
		case status.Conditions[i].Status != want.Status || status.Conditions[i].Reason != want.Reason || status.Conditions[i].Message != want.Message:
			cur := &status.Conditions[i]
			if cur.Status != want.Status {
				cur.LastTransitionTime = now
			}
			cur.Status, cur.Reason, cur.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}
