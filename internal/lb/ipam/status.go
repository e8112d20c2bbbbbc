package ipam

import (
	"context"
	"encoding/json"
	"fmt"

	"go.universe.tf/metallb/api/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// syncPoolStatus writes a pool's counters into its status, as MetalLB's
// pool status controller.
func (c *Controller) syncPoolStatus(ctx context.Context, name string) error {
	cur := c.config.Pool(name)
	if cur == nil || c.pools == nil || c.pools.byName[name] == nil {
		return nil
	}
	p := cur.DeepCopy()
	var st v1beta1.IPAddressPoolStatus
	st.AssignedIPv4, st.AssignedIPv6, st.AvailableIPv4, st.AvailableIPv6 = c.alloc.counters(name)
	if p.Status == st {
		return nil
	}
	p.Status = st
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return fmt.Errorf("encode IPAddressPool %s: %w", name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1beta1.GroupVersion.String())
	u.SetKind("IPAddressPool")
	_, err = c.dynamic.Resource(metallb.IPAddressPools).Namespace(metallb.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: update status of IPAddressPool %s: %w", controller.ErrStale, name, err)
	}
	if err != nil {
		return fmt.Errorf("update status of IPAddressPool %s: %w", name, err)
	}
	return nil
}

// The ConfigurationState MetalLB's controller reports its configuration's
// validity in, and its condition.
const (
	stateName          = "controller"
	stateCondition     = "poolReconcilerValid"
	stateFieldManager  = "poolReconciler"
	reasonConfigError  = "ConfigurationError"
	reasonReconciled   = "Reconciled"
	componentTypeLabel = "metallb.io/component-type"
)

// reportState writes the outcome of parsing the pools into the
// ConfigurationState controller in metallb-system, as MetalLB's: result
// Valid, or Invalid with the error as errorSummary and in the condition
// poolReconcilerValid.
func (c *Controller) reportState(ctx context.Context, parseErr error) error {
	cond := metav1.Condition{Type: stateCondition, Status: metav1.ConditionTrue, Reason: reasonReconciled, LastTransitionTime: metav1.Now()}
	st := v1beta1.ConfigurationStateStatus{Result: v1beta1.ConfigurationResultValid}
	if parseErr != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reasonConfigError, "configuration error: "+parseErr.Error()
		st.Result, st.ErrorSummary = v1beta1.ConfigurationResultInvalid, cond.Message
	}
	if c.reported == cond.Message+string(st.Result) {
		return nil
	}
	st.Conditions = []metav1.Condition{cond}
	obj := &v1beta1.ConfigurationState{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigurationState", APIVersion: v1beta1.GroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Name: stateName, Namespace: metallb.Namespace, Labels: map[string]string{componentTypeLabel: "controller"}},
	}
	states := c.dynamic.Resource(metallb.ConfigurationStates).Namespace(metallb.Namespace)
	opts := metav1.PatchOptions{FieldManager: stateFieldManager, Force: ptr.To(true)}
	for _, sub := range [][]string{nil, {"status"}} {
		if sub != nil {
			obj.Labels, obj.Status = nil, st
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode ConfigurationState: %w", err)
		}
		if _, err := states.Patch(ctx, stateName, types.ApplyPatchType, data, opts, sub...); apierrors.IsNotFound(err) {
			return nil // no metallb-system yet
		} else if err != nil {
			return fmt.Errorf("apply ConfigurationState %s/%s: %w", metallb.Namespace, stateName, err)
		}
	}
	c.reported = cond.Message + string(st.Result)
	return nil
}
