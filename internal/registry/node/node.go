// Package node is the Node strategy: a node registers with its status, its
// taints and resources are validated as upstream, pod CIDRs and the provider
// ID are set once, and `kubectl get nodes` shows the Ready condition and the
// roles from node-role.kubernetes.io/ labels.
package node

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/validate"
)

// Role labels: node-role.kubernetes.io/<role> and kubernetes.io/role=<role>.
const (
	roleLabelPrefix = "node-role.kubernetes.io/"
	roleLabel       = "kubernetes.io/role"
)

// Resource describes nodes.
func Resource() *registry.Resource {
	return &registry.Resource{
		Kind:               corev1.SchemeGroupVersion.WithKind("Node"),
		Resource:           "nodes",
		Singular:           "node",
		ShortNames:         []string{"no"},
		Status:             true,
		KeepStatusOnCreate: true,
		Strategy:           strategy{},
		Columns:            columns(),
		Fields: func(obj runtime.Object) fields.Set {
			return fields.Set{"spec.unschedulable": strconv.FormatBool(obj.(*corev1.Node).Spec.Unschedulable)}
		},
	}
}

type strategy struct{ registry.Base }

// Default copies capacity to allocatable when the node reports none.
func (strategy) Default(obj runtime.Object) {
	n := obj.(*corev1.Node)
	validate.RoundResources(n.Status.Capacity)
	validate.RoundResources(n.Status.Allocatable)
	if n.Status.Allocatable == nil && n.Status.Capacity != nil {
		n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	}
}

// PrepareForCreate drops the retired dynamic kubelet configuration fields.
func (strategy) PrepareForCreate(obj runtime.Object) {
	n := obj.(*corev1.Node)
	n.Spec.ConfigSource = nil
	n.Status.Config = nil
}

func (strategy) Validate(obj runtime.Object) field.ErrorList {
	return validateNode(obj.(*corev1.Node))
}

// ValidateUpdate adds upstream's update rules: pod CIDRs and the provider
// ID may only be set once, status addresses are unique.
func (strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	n, prev := obj.(*corev1.Node), old.(*corev1.Node)
	errs := validateNode(n)
	seen := map[corev1.NodeAddress]bool{}
	for i, a := range n.Status.Addresses {
		if seen[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}
	if len(prev.Spec.PodCIDRs) > 0 && !slices.Equal(prev.Spec.PodCIDRs, n.Spec.PodCIDRs) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "podCIDRs"), `node updates may not change podCIDR except from "" to valid`))
	}
	if prev.Spec.ProviderID != "" && prev.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), `node updates may not change providerID except from "" to valid`))
	}
	if n.Spec.DoNotUseExternalID != prev.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

func validateNode(n *corev1.Node) field.ErrorList {
	// upstream reports taints under metadata
	errs := validateTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))
	for _, name := range slices.Sorted(maps.Keys(n.Status.Capacity)) {
		errs = append(errs, validate.ResourceQuantity(name, n.Status.Capacity[name], field.NewPath("status", "capacity", string(name)))...)
	}
	for _, name := range slices.Sorted(maps.Keys(n.Status.Allocatable)) {
		errs = append(errs, validate.ResourceQuantity(name, n.Status.Allocatable[name], field.NewPath("status", "allocatable", string(name)))...)
	}
	cidrs := field.NewPath("spec", "podCIDRs")
	for i, c := range n.Spec.PodCIDRs {
		errs = append(errs, validation.IsValidCIDRForLegacyField(cidrs.Index(i), c, false, nil)...)
	}
	if len(n.Spec.PodCIDRs) > 1 {
		dual, err := netutils.IsDualStackCIDRStrings(n.Spec.PodCIDRs)
		if err == nil && (!dual || len(n.Spec.PodCIDRs) > 2) {
			errs = append(errs, field.Invalid(cidrs, n.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
		}
		seen := map[string]bool{}
		for i, c := range n.Spec.PodCIDRs {
			if seen[c] {
				errs = append(errs, field.Duplicate(cidrs.Index(i), c))
			}
			seen[c] = true
		}
	}
	return errs
}

// taintKey is how upstream's internal Taint renders in its duplicate-taint
// message: Go field names, since internal types have no JSON tags.
type taintKey struct {
	Key       string
	Value     string
	Effect    corev1.TaintEffect
	TimeAdded *metav1.Time
}

func validateTaints(taints []corev1.Taint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]map[string]bool{}
	for i, t := range taints {
		tp := p.Index(i)
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, tp.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validate.TaintEffect(t.Effect, tp.Child("effect"))...)
		if seen[t.Effect][t.Key] {
			dup := field.Duplicate(tp, taintKey{t.Key, t.Value, t.Effect, t.TimeAdded})
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = map[string]bool{}
		}
		seen[t.Effect][t.Key] = true
	}
	return errs
}

func columns() []registry.Column {
	cell := func(f func(*corev1.Node) string) func(runtime.Object) interface{} {
		return func(o runtime.Object) interface{} { return f(o.(*corev1.Node)) }
	}
	info := corev1.NodeSystemInfo{}.SwaggerDoc()
	orUnknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	return []registry.Column{
		registry.NameColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Status", Type: "string", Description: "The status of the node"},
			Cell: cell(status)},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Roles", Type: "string", Description: "The roles of the node"},
			Cell: cell(roles)},
		registry.AgeColumn(),
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Version", Type: "string", Description: info["kubeletVersion"]},
			Cell: cell(func(n *corev1.Node) string { return n.Status.NodeInfo.KubeletVersion })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Internal-IP", Type: "string", Priority: 1,
			Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
			Cell: cell(func(n *corev1.Node) string { return address(n, corev1.NodeInternalIP) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "External-IP", Type: "string", Priority: 1,
			Description: corev1.NodeStatus{}.SwaggerDoc()["addresses"]},
			Cell: cell(func(n *corev1.Node) string { return address(n, corev1.NodeExternalIP) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "OS-Image", Type: "string", Priority: 1, Description: info["osImage"]},
			Cell: cell(func(n *corev1.Node) string { return orUnknown(n.Status.NodeInfo.OSImage) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Kernel-Version", Type: "string", Priority: 1, Description: info["kernelVersion"]},
			Cell: cell(func(n *corev1.Node) string { return orUnknown(n.Status.NodeInfo.KernelVersion) })},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Container-Runtime", Type: "string", Priority: 1, Description: info["containerRuntimeVersion"]},
			Cell: cell(func(n *corev1.Node) string { return orUnknown(n.Status.NodeInfo.ContainerRuntimeVersion) })},
	}
}

// status is Ready or NotReady from the last Ready condition, Unknown
// without one, and ",SchedulingDisabled" for a cordoned node.
func status(n *corev1.Node) string {
	var parts []string
	var ready *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &n.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		parts = append(parts, "Unknown")
	case ready.Status == corev1.ConditionTrue:
		parts = append(parts, string(corev1.NodeReady))
	default:
		parts = append(parts, "Not"+string(corev1.NodeReady))
	}
	if n.Spec.Unschedulable {
		parts = append(parts, "SchedulingDisabled")
	}
	return strings.Join(parts, ",")
}

func roles(n *corev1.Node) string {
	set := map[string]bool{}
	for k, v := range n.Labels {
		switch {
		case strings.HasPrefix(k, roleLabelPrefix):
			if role := strings.TrimPrefix(k, roleLabelPrefix); role != "" {
				set[role] = true
			}
		case k == roleLabel && v != "":
			set[v] = true
		}
	}
	if len(set) == 0 {
		return "<none>"
	}
	return strings.Join(slices.Sorted(maps.Keys(set)), ",")
}

func address(n *corev1.Node, t corev1.NodeAddressType) string {
	for _, a := range n.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}
