package pod

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"

	"github.com/svcnet/svcnet/internal/controller/podstate"
	"github.com/svcnet/svcnet/internal/registry"
)

// maxDisruptedPods is upstream's bound on evictions the disruption
// controller has not confirmed yet: past it, evictions are refused.
const maxDisruptedPods = 2000

// evictionRetry is upstream's EvictionsRetry: conflicts on the pod or the
// budget are retried this often.
var evictionRetry = wait.Backoff{Steps: 20, Duration: 500 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

var evictionKind = policyv1.SchemeGroupVersion.WithKind("Eviction")

// tooManyRequestsMessage is upstream's answer when a budget forbids an
// eviction.
const tooManyRequestsMessage = "Cannot evict pod as it would violate the pod's disruption budget."

// Evictions serves pods/eviction (policy/v1 Eviction) as upstream's
// EvictionREST: a pod whose disruption budget allows it is deleted, its
// budget's disruptionsAllowed spent and the pod named in disruptedPods, so
// that the disruption controller does not count it while it goes; when the
// budget allows nothing, 429 TooManyRequests. It reads and writes through
// Client, the API server's own loopback client.
type Evictions struct {
	Client kubernetes.Interface
}

// Action is the pods/eviction subresource.
func (e *Evictions) Action() registry.Action {
	return registry.Action{Kind: evictionKind, Create: e.evict}
}

func (e *Evictions) evict(ctx context.Context, namespace, name string, obj runtime.Object) (runtime.Object, error) {
	ev := obj.(*policyv1.Eviction)
	if ev.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if opts.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *opts.IgnoreStoreReadErrorWithClusterBreakingPotential {
		return nil, apierrors.NewInvalid(evictionKind.GroupKind(), name, field.ErrorList{field.Invalid(
			field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true,
			"can not be set for pod eviction, try after removing the option")})
	}
	pods := e.Client.CoreV1().Pods(namespace)
	rvGiven := opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil
	shouldRetry := apierrors.IsConflict
	if rvGiven {
		shouldRetry = func(error) bool { return false }
	}
	// A pod that is not running (pending, terminal or already going)
	// disrupts nothing: it is deleted without asking its budget.
	var pod *corev1.Pod
	deleted := false
	err := retry.OnError(evictionRetry, shouldRetry, func() error {
		var err error
		if pod, err = pods.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if !ignoresBudget(pod) {
			return nil
		}
		o := opts
		if enforcesResourceVersion(pod) && !rvGiven {
			o = withResourceVersion(opts, pod.ResourceVersion)
		}
		if err := e.markAndDelete(ctx, pod, o); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case deleted:
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}

	budgets, err := e.budgetsOf(ctx, pod)
	if err != nil {
		return nil, err
	}
	if len(budgets) > 1 {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
	}
	pinRV := false
	if len(budgets) == 1 {
		pdb := &budgets[0]
		if !podstate.Ready(pod) && unhealthyMayGo(pdb) {
			// An unready pod does not count as healthy: deleting it
			// spends nothing, as long as it stays unready.
			pinRV = true
		} else if err := e.spend(ctx, pod, pdb, opts.DryRun); err != nil {
			return nil, err
		}
	}
	o := opts
	if pinRV {
		o = withResourceVersion(opts, pod.ResourceVersion)
	}
	if err := e.markAndDelete(ctx, pod, o); err != nil {
		if apierrors.IsConflict(err) && pinRV && !rvGiven {
			return nil, tooManyRequests(budgets[0].Name)
		}
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// ignoresBudget is upstream's canIgnorePDB.
func ignoresBudget(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// enforcesResourceVersion is upstream's shouldEnforceResourceVersion: a
// pod that may still become ready is deleted only as it was read.
func enforcesResourceVersion(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// unhealthyMayGo reports whether an unready pod of pdb may be evicted
// without spending the budget: always under AlwaysAllow, and under
// IfHealthyBudget (the default) while the application is healthy enough.
func unhealthyMayGo(pdb *policyv1.PodDisruptionBudget) bool {
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
		return true
	}
	return pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0
}

func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	o := opts.DeepCopy()
	if o.Preconditions == nil {
		o.Preconditions = &metav1.Preconditions{}
	}
	o.Preconditions.ResourceVersion = &rv
	return o
}

// budgetsOf lists the budgets whose selector matches the pod.
func (e *Evictions) budgetsOf(ctx context.Context, pod *corev1.Pod) ([]policyv1.PodDisruptionBudget, error) {
	list, err := e.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pod disruption budgets: %w", err)
	}
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range list.Items {
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out, nil
}

// spend checks that pdb allows one more disruption and records it in the
// budget's status, retrying on a conflict with a fresh read, as upstream's
// checkAndDecrement.
func (e *Evictions) spend(ctx context.Context, pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, dryRun []string) error {
	client := e.Client.PolicyV1().PodDisruptionBudgets(pod.Namespace)
	fresh := false
	err := retry.RetryOnConflict(evictionRetry, func() error {
		if fresh {
			var err error
			if pdb, err = client.Get(ctx, pdb.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		fresh = true
		if err := allows(pdb); err != nil {
			return err
		}
		pdb = pdb.DeepCopy()
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptionsAllowed == 0 {
			pdbhelper.UpdateDisruptionAllowedCondition(pdb)
		}
		if len(dryRun) > 0 {
			return nil
		}
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod.Name] = metav1.Now()
		_, err := client.UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
		return err
	})
	if wait.Interrupted(err) {
		return apierrors.NewTimeoutError(fmt.Sprintf("couldn't update PodDisruptionBudget %q due to conflicts", pdb.Name), 10)
	}
	return err
}

// allows refuses an eviction the budget does not allow, with upstream's
// errors and DisruptionBudget causes.
func allows(pdb *policyv1.PodDisruptionBudget) error {
	forbidden := func(reason, cause string) error {
		err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), pdb.Name, errors.New(reason))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
			Message: fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: %s", pdb.Name, cause)})
		return err
	}
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return tooManyRequests(pdb.Name)
	case pdb.Status.DisruptionsAllowed < 0:
		return forbidden("pdb disruptions allowed is negative", "pdb disruptions allowed is negative")
	case len(pdb.Status.DisruptedPods) > maxDisruptedPods:
		return forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			"too many pending evictions not confirmed by PDB controller")
	case pdb.Status.DisruptionsAllowed > 0:
		return nil
	}
	err := apierrors.NewTooManyRequests(tooManyRequestsMessage, 0)
	cond := meta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	failed := cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != ""
	var msg string
	switch {
	case failed && cond.Reason == policyv1.SyncFailedReason:
		msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
	case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
		msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
	case failed:
		msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
	default:
		msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
	}
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
	return err
}

// tooManyRequests is upstream's answer while the budget's status lags its
// spec (or a pod became ready while it was being evicted).
func tooManyRequests(name string) error {
	err := apierrors.NewTooManyRequests(tooManyRequestsMessage, 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

// markAndDelete gives the pod upstream's DisruptionTarget condition and
// deletes it with the eviction's options. The condition is written only to
// the pod the preconditions name; its write moves the resourceVersion
// precondition on.
func (e *Evictions) markAndDelete(ctx context.Context, pod *corev1.Pod, opts *metav1.DeleteOptions) error {
	pods := e.Client.CoreV1().Pods(pod.Namespace)
	if len(opts.DryRun) == 0 {
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != "" && *p.UID != pod.UID {
				return apierrors.NewConflict(corev1.Resource("Pod"), pod.Name, fmt.Errorf(
					"the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, pod.UID))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != "" && *p.ResourceVersion != pod.ResourceVersion {
				return apierrors.NewConflict(corev1.Resource("Pod"), pod.Name, fmt.Errorf(
					"the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, pod.ResourceVersion))
			}
		}
		marked := pod.DeepCopy()
		setCondition(&marked.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"})
		updated, err := pods.UpdateStatus(ctx, marked, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		if opts.Preconditions != nil && opts.Preconditions.ResourceVersion != nil {
			opts = withResourceVersion(opts, updated.ResourceVersion)
		}
	}
	return pods.Delete(ctx, pod.Name, *opts)
}

// setCondition sets the pod condition of c's type, moving its transition
// time only when its status changes.
func setCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	c.LastTransitionTime = metav1.Now()
	for i := range status.Conditions {
		if old := &status.Conditions[i]; old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			*old = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
