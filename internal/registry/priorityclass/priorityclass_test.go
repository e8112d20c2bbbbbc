package priorityclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

type pc = *schedulingv1.PriorityClass

func valid() pc {
	return &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: "high-priority"},
		Value:            1000000,
		Description:      "for pods that matter",
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
	}
}

// system is a valid class named as a system one, with its value.
func system(name string, value int32) func(pc) {
	return func(c pc) { c.Name, c.Value = name, value }
}

// reserved is upstream's refusal of a class named with the system prefix.
const reserved = "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "

func TestValidate(t *testing.T) {
	registrytest.RunValidate(t, strategy{}, valid, []registrytest.Case[pc]{
		{Name: "valid", Change: func(pc) {}},
		{Name: "never preempts", Change: func(c pc) { c.PreemptionPolicy = ptr.To(corev1.PreemptNever) }},
		{Name: "global default", Change: func(c pc) { c.GlobalDefault = true }},
		{Name: "negative", Change: func(c pc) { c.Value = -2147483648 }},
		{Name: "highest user value", Change: func(c pc) { c.Value = 1000000000 }},
		{Name: "above the user values", Change: func(c pc) { c.Value = 1000000001 }, Want: []string{
			"value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
		}},
		{Name: "system-node-critical", Change: system("system-node-critical", 2000001000)},
		{Name: "system-cluster-critical", Change: system("system-cluster-critical", 2000000000)},
		{Name: "system class with another value", Change: system("system-cluster-critical", 1000), Want: []string{
			reserved + "value of system-cluster-critical PriorityClass must be 2000000000",
		}},
		{Name: "system class as the global default", Change: func(c pc) {
			system("system-node-critical", 2000001000)(c)
			c.GlobalDefault = true
		}, Want: []string{
			reserved + "globalDefault of system-node-critical PriorityClass must be false",
		}},
		// The value limit is not checked for reserved names.
		{Name: "unknown system class", Change: system("system-important", 2000000500), Want: []string{
			reserved + "system-important is not a known system priority class",
		}},
		{Name: "unknown preemption policy", Change: func(c pc) {
			c.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("Sometimes"))
		}, Want: []string{
			`preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`,
		}},
		{Name: "empty preemption policy", Change: func(c pc) { c.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("")) }, Want: []string{
			"preemptionPolicy: Required value",
		}},
		{Name: "errors in upstream's order", Change: func(c pc) {
			c.Value = 2000000000
			c.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("Always"))
		}, Want: []string{
			"value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
			`preemptionPolicy: Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"`,
		}},
	})
}

func TestValidateUpdate(t *testing.T) {
	registrytest.RunValidateUpdate(t, strategy{}, valid, []registrytest.Case[pc]{
		{Name: "unchanged", Change: func(pc) {}},
		{Name: "description and global default", Change: func(c pc) {
			c.Description, c.GlobalDefault = "", true
		}},
		{Name: "value", Change: func(c pc) { c.Value++ }, Want: []string{
			"value: Forbidden: may not be changed in an update.",
		}},
		{Name: "preemption policy", Change: func(c pc) { c.PreemptionPolicy = ptr.To(corev1.PreemptNever) }, Want: []string{
			`preemptionPolicy: Invalid value: "Never": field is immutable`,
		}},
		// As upstream, an update is not validated as a create is.
		{Name: "system class made the global default", Old: system("system-node-critical", 2000001000),
			Change: func(c pc) { c.GlobalDefault = true }},
		{Name: "both", Change: func(c pc) {
			c.Value = 5
			c.PreemptionPolicy = ptr.To(corev1.PreemptNever)
		}, Want: []string{
			"value: Forbidden: may not be changed in an update.",
			`preemptionPolicy: Invalid value: "Never": field is immutable`,
		}},
	})
}

func TestDefaultAndCreate(t *testing.T) {
	c := valid()
	c.PreemptionPolicy = nil
	c = registrytest.Created(strategy{}, c)
	if c.PreemptionPolicy == nil || *c.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("preemptionPolicy = %v, want PreemptLowerPriority", c.PreemptionPolicy)
	}
	if c.Generation != 1 {
		t.Errorf("generation = %d, want 1", c.Generation)
	}
	never := valid()
	never.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	if strategy.Default(strategy{}, never); *never.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("preemptionPolicy Never defaulted to %s", *never.PreemptionPolicy)
	}
}

func TestSystemClasses(t *testing.T) {
	got := SystemClasses()
	want := []struct {
		name        string
		value       int32
		description string
	}{
		{"system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their current node."},
		{"system-cluster-critical", 2000000000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
	}
	if len(got) != len(want) {
		t.Fatalf("%d system classes, want %d", len(got), len(want))
	}
	for i, w := range want {
		c := got[i]
		if c.Name != w.name || c.Value != w.value || c.Description != w.description || c.GlobalDefault || c.PreemptionPolicy != nil {
			t.Errorf("system class %d = %+v, want %+v", i, c, w)
		}
		if errs := (strategy{}).Validate(registrytest.Created(strategy{}, c)); len(errs) > 0 {
			t.Errorf("%s does not validate: %v", c.Name, errs)
		}
	}
	// Copies: changing one changes no other.
	got[0].Value = 1
	if SystemClasses()[0].Value != 2000001000 {
		t.Error("SystemClasses returned the shared definitions")
	}
}

func TestRefuseDelete(t *testing.T) {
	for _, name := range []string{"system-node-critical", "system-cluster-critical"} {
		err := strategy{}.RefuseDelete(name)
		if !apierrors.IsForbidden(err) || err.Error() != `priorityclasses.scheduling.k8s.io "`+name+`" is forbidden: this is a system priority class and cannot be deleted` {
			t.Errorf("delete %s: %v", name, err)
		}
	}
	for _, name := range []string{"high-priority", "system-important"} {
		if err := (strategy{}).RefuseDelete(name); err != nil {
			t.Errorf("delete %s: %v", name, err)
		}
	}
}

func TestColumns(t *testing.T) {
	c := valid()
	c.GlobalDefault = true
	registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"},
		[]interface{}{"high-priority", int64(1000000), true, "<unknown>", "PreemptLowerPriority"})
	c.PreemptionPolicy = nil
	registrytest.ExpectRow(t, Resource().Columns, c, []string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"},
		[]interface{}{"high-priority", int64(1000000), true, "<unknown>", ""})
}

func TestResource(t *testing.T) {
	r := Resource()
	if r.Resource != "priorityclasses" || r.Singular != "priorityclass" || r.Namespaced || r.Status || r.Generation ||
		len(r.ShortNames) != 1 || r.ShortNames[0] != "pc" || r.Kind.String() != "scheduling.k8s.io/v1, Kind=PriorityClass" {
		t.Errorf("unexpected discovery data: %+v", r)
	}
}
