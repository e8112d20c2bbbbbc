package prioritylevelconfiguration

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](10),
				LendablePercent:          ptr.To[int32](50),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 16, HandSize: 4, QueueLengthLimit: 20}},
			},
		},
	}
}

func TestDefault(t *testing.T) {
	type pl = *flowcontrolv1.PriorityLevelConfiguration
	spec := func(s flowcontrolv1.PriorityLevelConfigurationSpec) pl {
		return &flowcontrolv1.PriorityLevelConfiguration{Spec: s}
	}
	registrytest.RunDefault(t, strategy{}, []registrytest.DefaultCase[pl]{
		{Name: "limited queuing", In: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Limited",
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: "Queue",
				Queuing: &flowcontrolv1.QueuingConfiguration{}}}}),
			Want: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Limited",
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](30), LendablePercent: ptr.To[int32](0),
					LimitResponse: flowcontrolv1.LimitResponse{Type: "Queue",
						Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 64, HandSize: 8, QueueLengthLimit: 50}}}})},
		{Name: "limited zero shares kept", In: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Limited",
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{Type: "Reject"}}}),
			Want: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Limited",
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To[int32](0), LendablePercent: ptr.To[int32](0),
					LimitResponse: flowcontrolv1.LimitResponse{Type: "Reject"}}})},
		{Name: "exempt", In: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Exempt", Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{}}),
			Want: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Exempt", Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](0), LendablePercent: ptr.To[int32](0)}})},
		{Name: "nothing to default", In: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Exempt"}),
			Want: spec(flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Exempt"})},
	})
}

func TestValidate(t *testing.T) {
	type pl = *flowcontrolv1.PriorityLevelConfiguration
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[pl]{
		{Name: "valid", Change: func(pl) {}},
		// The declarative errors replace the handwritten ones they cover.
		{Name: "no type", Change: func(p pl) { p.Spec.Type = "" }, Want: []string{
			"spec.limited: Forbidden",
			"spec.type: Required value",
		}},
		{Name: "unknown type", Change: func(p pl) { p.Spec.Type = "Unlimited"; p.Spec.Limited = nil }, Want: []string{
			`spec.type: Unsupported value: "Unlimited": supported values: "Exempt", "Limited"`,
		}},
		{Name: "exempt not named exempt", Change: func(p pl) {
			p.Spec.Type = flowcontrolv1.PriorityLevelEnablementExempt
		}, Want: []string{
			`spec.type: Invalid value: "Exempt": must be 'Exempt' if and only if ` + "`name`" + ` is 'exempt'`,
			"spec.limited: Forbidden",
		}},
		{Name: "limited missing", Change: func(p pl) { p.Spec.Limited = nil }, Want: []string{
			"spec.limited: Required value",
		}},
		{Name: "limited with exempt", Change: func(p pl) { p.Spec.Exempt = &flowcontrolv1.ExemptPriorityLevelConfiguration{} }, Want: []string{
			"spec.exempt: Forbidden",
		}},
		{Name: "ranges", Change: func(p pl) {
			p.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](-1)
			p.Spec.Limited.LendablePercent = ptr.To[int32](101)
			p.Spec.Limited.BorrowingLimitPercent = ptr.To[int32](-5)
		}, Want: []string{
			"spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
			"spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
			"spec.limited.borrowingLimitPercent: Invalid value: -5: if specified, must be a non-negative integer",
		}},
		{Name: "queuing", Change: func(p pl) {
			p.Spec.Limited.LimitResponse.Queuing = &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 5, QueueLengthLimit: 0}
		}, Want: []string{
			"spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: 0: must be positive",
			"spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
		}},
		{Name: "too many queues", Change: func(p pl) { p.Spec.Limited.LimitResponse.Queuing.Queues = 10000001 }, Want: []string{
			"spec.limited.limitResponse.queuing.queues: Invalid value: 10000001: must not be greater than 10000000",
			"spec.limited.limitResponse.queuing.handSize: Invalid value: 4: required entropy bits of deckSize 10000001 and handSize 4 should not be greater than 60",
		}},
		{Name: "exempt named exempt with limited", Change: func(p pl) {
			p.Name = "exempt"
			p.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{}}
		}, Want: []string{
			`spec: Invalid value: {"type":"Exempt","limited":{"nominalConcurrencyShares":null,"limitResponse":{"type":""}}}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value`,
			"spec.limited: Forbidden",
			// Upstream's declarative rules check a limited member of any
			// type.
			"spec.limited.limitResponse.type: Required value",
		}},
		{Name: "entropy", Change: func(p pl) {
			p.Spec.Limited.LimitResponse.Queuing.Queues, p.Spec.Limited.LimitResponse.Queuing.HandSize = 10000000, 10
		}, Want: []string{
			"spec.limited.limitResponse.queuing.handSize: Invalid value: 10: required entropy bits of deckSize 10000000 and handSize 10 should not be greater than 60",
		}},
		{Name: "reject with queuing", Change: func(p pl) { p.Spec.Limited.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject }, Want: []string{
			"spec.limited.limitResponse.queuing: Forbidden",
		}},
		{Name: "queue without queuing", Change: func(p pl) { p.Spec.Limited.LimitResponse.Queuing = nil }, Want: []string{
			"spec.limited.limitResponse.queuing: Required value",
		}},
		{Name: "no limit response type", Change: func(p pl) {
			p.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{}
		}, Want: []string{
			"spec.limited.limitResponse.type: Required value",
		}},
		{Name: "round-trip annotation", Change: func(p pl) {
			p.Annotations = map[string]string{"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares": ""}
		}, Want: []string{
			"metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden",
		}},
	})
}

func TestBootstrapValid(t *testing.T) {
	for _, list := range [][]*flowcontrolv1.PriorityLevelConfiguration{bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations} {
		for _, b := range list {
			pl := b.DeepCopy()
			strategy{}.Default(pl)
			registrytest.ExpectErrors(t, strategy{}.Validate(pl))
		}
	}
	// The exempt level's exempt member is the administrator's; the rest
	// of a mandatory spec is fixed.
	exempt := bootstrap.MandatoryPriorityLevelConfigurationExempt.DeepCopy()
	exempt.Spec.Exempt.NominalConcurrencyShares = ptr.To[int32](5)
	registrytest.ExpectErrors(t, strategy{}.Validate(exempt))
	catchAll := bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy()
	catchAll.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](6)
	errs := strategy{}.Validate(catchAll)
	if len(errs) != 1 || errs[0].Detail != "spec of 'catch-all' must equal the fixed value" {
		t.Errorf("changed catch-all: %v", errs)
	}
}

func TestColumns(t *testing.T) {
	cols := Resource().Columns
	names := []string{"Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"}
	pl := valid()
	age := cols[6].Cell(pl)
	registrytest.ExpectRow(t, cols, pl, names, []interface{}{"team-a", "Limited", int32(10), int32(16), int32(4), int32(20), age})
	pl.Spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}
	registrytest.ExpectRow(t, cols, pl, names, []interface{}{"team-a", "Limited", int32(10), "<none>", "<none>", "<none>", age})
	pl.Spec = flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}
	registrytest.ExpectRow(t, cols, pl, names, []interface{}{"team-a", "Exempt", "<none>", "<none>", "<none>", "<none>", age})
}
