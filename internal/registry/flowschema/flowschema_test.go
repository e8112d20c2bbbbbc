package flowschema

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func valid() *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "team-a", Name: "*"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""},
					Resources: []string{"pods"}, Namespaces: []string{"team-a"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/healthz", "/api/*"}}},
			}},
		},
	}
}

func TestDefault(t *testing.T) {
	fs := &flowcontrolv1.FlowSchema{}
	strategy{}.Default(fs)
	if fs.Spec.MatchingPrecedence != 1000 {
		t.Errorf("matchingPrecedence %d, want 1000", fs.Spec.MatchingPrecedence)
	}
}

func TestValidate(t *testing.T) {
	type fs = *flowcontrolv1.FlowSchema
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[fs]{
		{Name: "valid", Change: func(fs) {}},
		{Name: "precedence 0", Change: func(f fs) { f.Spec.MatchingPrecedence = 0 }, Want: []string{
			"spec.matchingPrecedence: Invalid value: 0: must be a positive value",
		}},
		{Name: "precedence too high", Change: func(f fs) { f.Spec.MatchingPrecedence = 10001 }, Want: []string{
			"spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000",
		}},
		{Name: "precedence 1", Change: func(f fs) { f.Spec.MatchingPrecedence = 1 }, Want: []string{
			"spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
		}},
		{Name: "no priority level", Change: func(f fs) { f.Spec.PriorityLevelConfiguration.Name = "" }, Want: []string{
			"spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
		}},
		{Name: "bad distinguisher", Change: func(f fs) { f.Spec.DistinguisherMethod.Type = "ByGroup" }, Want: []string{
			`spec.distinguisherMethod.type: Unsupported value: {"Type":"ByGroup"}: supported values: "ByNamespace", "ByUser"`,
		}},
		{Name: "rule without subjects or rules", Change: func(f fs) {
			f.Spec.Rules[0] = flowcontrolv1.PolicyRulesWithSubjects{}
		}, Want: []string{
			"spec.rules[0].subjects: Required value: subjects must contain at least one value",
			"spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty",
		}},
		{Name: "subject kinds", Change: func(f fs) {
			f.Spec.Rules[0].Subjects = []flowcontrolv1.Subject{
				{Kind: flowcontrolv1.SubjectKindUser, Group: &flowcontrolv1.GroupSubject{Name: "g"}},
				{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: "x"}},
				{Kind: "Robot"},
			}
		}, Want: []string{
			"spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
			"spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
			"spec.rules[0].subjects[1].serviceAccount.namespace: Required value: must specify namespace for service account",
			`spec.rules[0].subjects[2].kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"`,
		}},
		{Name: "resource rule", Change: func(f fs) {
			f.Spec.Rules[0].ResourceRules[0] = flowcontrolv1.ResourcePolicyRule{Verbs: []string{"get", "*"}, APIGroups: []string{"*", "apps"}}
		}, Want: []string{
			`spec.rules[0].resourceRules[0].verbs: Invalid value: ["get","*"]: if '*' is present, must not specify other verbs`,
			`spec.rules[0].resourceRules[0].apiGroups: Invalid value: ["*","apps"]: if '*' is present, must not specify other api groups`,
			"spec.rules[0].resourceRules[0].resources: Required value: resource rules must supply at least one resource",
			"spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace",
		}},
		{Name: "non-resource URLs", Change: func(f fs) {
			f.Spec.Rules[0].NonResourceRules[0] = flowcontrolv1.NonResourcePolicyRule{Verbs: []string{"fetch"}, NonResourceURLs: []string{"healthz", "/a*"}}
		}, Want: []string{
			`spec.rules[0].nonResourceRules[0].verbs: Unsupported value: ["fetch"]: supported values: "create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"`,
			`spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "healthz": must start with slash`,
			`spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: "/a*": wildcard can only do suffix matching`,
		}},
		{Name: "duplicate condition", Change: func(f fs) {
			f.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}, {}}
		}, Want: []string{
			`status.conditions[1].type: Duplicate value: "Dangling"`,
			"status.conditions[2].type: Required value",
		}},
	})
}

func TestMandatory(t *testing.T) {
	for _, m := range bootstrap.MandatoryFlowSchemas {
		fs := m.DeepCopy()
		strategy{}.Default(fs)
		registrytest.ExpectErrors(t, strategy{}.Validate(fs))
	}
	fs := bootstrap.MandatoryFlowSchemaCatchAll.DeepCopy()
	fs.Spec.MatchingPrecedence = 9000
	errs := strategy{}.Validate(fs)
	if len(errs) != 1 || errs[0].Field != "spec" || errs[0].Detail != "spec of 'catch-all' must equal the fixed value" {
		t.Errorf("changed catch-all: %v", errs)
	}
	for _, s := range bootstrap.SuggestedFlowSchemas {
		fs := s.DeepCopy()
		strategy{}.Default(fs)
		registrytest.ExpectErrors(t, strategy{}.Validate(fs))
	}
}

func TestColumns(t *testing.T) {
	fs := valid()
	fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse}}
	cols := Resource().Columns
	if got := registrytest.Names(cols); len(got) != 6 || got[4] != "Age" || got[5] != "MissingPL" {
		t.Errorf("columns %v", got)
	}
	for i, want := range []interface{}{"team-a", "workload-low", int64(500), "ByUser"} {
		if got := cols[i].Cell(fs); got != want {
			t.Errorf("%s = %#v, want %#v", cols[i].Name, got, want)
		}
	}
	if got := cols[5].Cell(fs); got != "False" {
		t.Errorf("MissingPL = %v", got)
	}
	fs.Spec.DistinguisherMethod, fs.Status.Conditions = nil, nil
	if got, got5 := cols[3].Cell(fs), cols[5].Cell(fs); got != "<none>" || got5 != "?" {
		t.Errorf("DistinguisherMethod %v, MissingPL %v", got, got5)
	}
}
