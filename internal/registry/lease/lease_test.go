package lease

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []string
	}{
		{name: "node heartbeat", spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40)}},
		{name: "empty spec", spec: coordinationv1.LeaseSpec{}},
		{name: "bad durations", spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](0), LeaseTransitions: ptr.To[int32](-1)}, want: []string{
			"spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
			"spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
		}},
		{name: "unknown strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("Newest"))}, want: []string{
			"spec.strategy.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\"",
		}},
		{name: "custom strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("example.com/mine"))}},
		{name: "preferred holder without strategy", spec: coordinationv1.LeaseSpec{PreferredHolder: ptr.To("a")}, want: []string{
			"spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"}, Spec: tt.spec}
			registrytest.ExpectErrors(t, strategy{}.Validate(l), tt.want...)
			registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(l, l.DeepCopy()), tt.want...)
		})
	}
}

func TestLeaderElectionFieldsDropped(t *testing.T) {
	withFields := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
			Strategy: ptr.To(coordinationv1.OldestEmulationVersion), PreferredHolder: ptr.To("a")}}
	}
	l := withFields()
	strategy{}.PrepareForCreate(l)
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil {
		t.Errorf("create kept %+v", l.Spec)
	}
	l = withFields()
	strategy{}.PrepareForUpdate(l, &coordinationv1.Lease{})
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil {
		t.Errorf("update of a lease without them kept %+v", l.Spec)
	}
	l = withFields()
	strategy{}.PrepareForUpdate(l, withFields())
	if l.Spec.Strategy == nil || l.Spec.PreferredHolder == nil {
		t.Errorf("update of a lease already using them dropped them: %+v", l.Spec)
	}
}

func TestColumns(t *testing.T) {
	for _, tt := range []struct {
		holder *string
		want   string
	}{{ptr.To("node-1"), "node-1"}, {nil, ""}} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: tt.holder}}
		registrytest.ExpectRow(t, Resource().Columns, l, []string{"Name", "Holder", "Age"}, []interface{}{"node-1", tt.want, "<unknown>"})
	}
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "leases" || !r.Namespaced || r.Status || r.Generation || r.Kind.String() != "coordination.k8s.io/v1, Kind=Lease" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
