package validate

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	restartPolicies    = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies        = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	preemptionPolicies = []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}
	taintEffects       = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	tolerationOps      = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}
	fsGroupPolicies    = []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeAlways, corev1.FSGroupChangeOnRootMismatch}
	osNames            = []corev1.OSName{corev1.Linux, corev1.Windows}
	unsatisfiable      = []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
	inclusionPolicies  = []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}
	sysctlName         = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)
)

// comparisonTolerationOps are what upstream names, in its order, when it
// refuses Lt and Gt (its alpha TaintTolerationComparisonOperators is off).
var comparisonTolerationOps = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists,
	corev1.TolerationOpLt, corev1.TolerationOpGt}

// Limits of the resolver configuration, from libc.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxSysctlLength       = 253
)

// PodSpec checks a pod spec. pod is the owning pod's metadata, or nil for
// the spec of a template, which skips the rules that only hold for pods.
func PodSpec(spec *corev1.PodSpec, pod *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(p.Child("terminationGracePeriodSeconds"), ""))
	}
	podName := ""
	if pod != nil {
		podName = pod.Name
	}
	vols, volErrs := Volumes(spec.Volumes, podName, p.Child("volumes"))
	errs = append(errs, volErrs...)
	ctx := &podContext{volumes: vols, gracePeriod: spec.TerminationGracePeriodSeconds, restartPolicy: spec.RestartPolicy}
	errs = append(errs, containers(spec.Containers, ctx, p.Child("containers"))...)
	errs = append(errs, initContainers(spec.InitContainers, spec.Containers, ctx, p.Child("initContainers"))...)
	errs = append(errs, ephemeralContainers(spec.EphemeralContainers, spec, ctx, p.Child("ephemeralContainers"))...)
	errs = append(errs, hostNetworkPorts(spec, pod != nil, p)...)

	errs = append(errs, oneOf(spec.RestartPolicy, restartPolicies, p.Child("restartPolicy"))...)
	errs = append(errs, oneOf(spec.DNSPolicy, dnsPolicies, p.Child("dnsPolicy"))...)
	errs = append(errs, metavalidation.ValidateLabels(spec.NodeSelector, p.Child("nodeSelector"))...)
	errs = append(errs, podSecurityContext(spec, p.Child("securityContext"))...)
	errs = append(errs, affinity(spec.Affinity, p.Child("affinity"))...)
	errs = append(errs, dnsConfig(spec.DNSConfig, spec.DNSPolicy, p.Child("dnsConfig"))...)
	errs = append(errs, topologySpread(spec.TopologySpreadConstraints, p.Child("topologySpreadConstraints"))...)
	for i, gate := range spec.ReadinessGates {
		errs = append(errs, QualifiedName(string(gate.ConditionType), p.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	gates := map[string]bool{}
	for i, gate := range spec.SchedulingGates {
		gp := p.Child("schedulingGates").Index(i)
		errs = append(errs, QualifiedName(gate.Name, gp)...)
		if gates[gate.Name] {
			errs = append(errs, field.Duplicate(gp, gate.Name))
		}
		gates[gate.Name] = true
	}
	errs = append(errs, hostUsers(spec, p)...)
	if spec.ServiceAccountName != "" {
		errs = append(errs, Name(apivalidation.ValidateServiceAccountName, spec.ServiceAccountName, p.Child("serviceAccountName"))...)
	}
	if spec.NodeName != "" {
		errs = append(errs, Name(apivalidation.NameIsDNSSubdomain, spec.NodeName, p.Child("nodeName"))...)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		errs = append(errs, DNSLabel(spec.Hostname, p.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, DNSLabel(spec.Subdomain, p.Child("subdomain"))...)
	}
	errs = append(errs, Tolerations(spec.Tolerations, p.Child("tolerations"))...)
	for i, alias := range spec.HostAliases {
		ap := p.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(ap.Child("ip"), alias.IP)...)
		for j, hostname := range alias.Hostnames {
			errs = append(errs, DNSSubdomain(hostname, ap.Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		errs = append(errs, Name(apivalidation.NameIsDNSSubdomain, spec.PriorityClassName, p.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		errs = append(errs, Name(apivalidation.NameIsDNSSubdomain, *spec.RuntimeClassName, p.Child("runtimeClassName"))...)
	}
	if pp := spec.PreemptionPolicy; pp != nil {
		errs = append(errs, oneOf(*pp, preemptionPolicies, p.Child("preemptionPolicy"))...)
	}
	if spec.Overhead != nil {
		errs = append(errs, ResourceRequirements(&corev1.ResourceRequirements{Limits: spec.Overhead}, p.Child("overhead"))...)
	}
	if os := spec.OS; os != nil {
		if os.Name == "" {
			errs = append(errs, field.Required(p.Child("os").Child("name"), "cannot be empty"))
		} else if os.Name != corev1.Linux && os.Name != corev1.Windows {
			errs = append(errs, field.NotSupported(p.Child("os"), os.Name, osNames))
		}
	}
	if pod != nil {
		errs = append(errs, serviceAccountTokens(spec, p)...)
		for i, c := range spec.Containers {
			errs = append(errs, ImageWhitespace(c.Image, p.Child("containers").Index(i).Child("image"))...)
		}
		for i, c := range spec.InitContainers {
			errs = append(errs, ImageWhitespace(c.Image, p.Child("initContainers").Index(i).Child("image"))...)
		}
	}
	return errs
}

// PodTemplateSpec checks the pod template of a workload.
func PodTemplateSpec(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := metavalidation.ValidateLabels(t.Labels, p.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, p.Child("annotations"))...)
	errs = append(errs, PodSpec(&t.Spec, nil, p.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(p.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// hostNetworkPorts: with host networking a pod's host ports are its
// container ports; a template may leave them unset.
func hostNetworkPorts(spec *corev1.PodSpec, isPod bool, p *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if (isPod || port.HostPort != 0) && port.HostPort != port.ContainerPort {
				errs = append(errs, field.Invalid(p.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"),
					port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return errs
}

func serviceAccountTokens(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	if spec.ServiceAccountName != "" {
		return nil
	}
	var errs field.ErrorList
	for vi, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for si, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				errs = append(errs, field.Forbidden(p.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken"),
					"must not be specified when serviceAccountName is not set"))
			}
		}
	}
	return errs
}

func podSecurityContext(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	sc := spec.SecurityContext
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(p.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	errs = append(errs, runAsIDs(sc.RunAsUser, sc.RunAsGroup, p)...)
	for i, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			errs = append(errs, field.Invalid(p.Child("supplementalGroups").Index(i), gid, msg))
		}
	}
	if share := spec.ShareProcessNamespace; share != nil && spec.HostPID && *share {
		errs = append(errs, field.Invalid(p.Child("shareProcessNamespace"), *share, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	names := map[string]bool{}
	for i, s := range sc.Sysctls {
		np := p.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(np, ""))
		case len(s.Name) > maxSysctlLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(np, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", maxSysctlLength, sysctlName)))
		case names[s.Name]:
			errs = append(errs, field.Duplicate(np, s.Name))
		}
		names[s.Name] = true
	}
	if pol := sc.FSGroupChangePolicy; pol != nil && *pol != corev1.FSGroupChangeAlways && *pol != corev1.FSGroupChangeOnRootMismatch {
		errs = append(errs, field.NotSupported(p.Child("fsGroupChangePolicy"), pol, fsGroupPolicies))
	}
	return append(errs, seccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))...)
}

// hostUsers: a pod in its own user namespace may not share the host's
// network, PID or IPC namespaces.
func hostUsers(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	var errs field.ErrorList
	const msg = "when `pod.Spec.HostUsers` is false"
	if spec.HostNetwork {
		errs = append(errs, field.Forbidden(p.Child("hostNetwork"), msg))
	}
	if spec.HostPID {
		errs = append(errs, field.Forbidden(p.Child("HostPID"), msg))
	}
	if spec.HostIPC {
		errs = append(errs, field.Forbidden(p.Child("HostIPC"), msg))
	}
	return errs
}

func dnsConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, p *field.Path) field.ErrorList {
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(p, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(p.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	var errs field.ErrorList
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(p.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(p.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(p.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(p.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range cfg.Searches {
		if search != "." {
			search = strings.TrimSuffix(search, ".")
			errs = append(errs, Invalid(p.Child("searches").Index(i), search, validation.IsDNS1123SubdomainWithUnderscore(search))...)
		}
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			errs = append(errs, field.Required(p.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// Tolerations checks pod tolerations.
func Tolerations(tolerations []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		tp := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, tp.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		case corev1.TolerationOpLt, corev1.TolerationOpGt:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, comparisonTolerationOps))
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, tolerationOps))
		}
		if t.Effect != "" {
			errs = append(errs, TaintEffect(t.Effect, tp.Child("effect"))...)
		}
	}
	return errs
}

// TaintEffect checks the effect of a taint or toleration.
func TaintEffect(effect corev1.TaintEffect, p *field.Path) field.ErrorList {
	return oneOf(effect, taintEffects, p)
}

func affinity(a *corev1.Affinity, p *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := p.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			errs = append(errs, NodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, np.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if term.Weight <= 0 || term.Weight > 100 {
				errs = append(errs, field.Invalid(tp.Child("weight"), term.Weight, "must be in the range 1-100"))
			}
			errs = append(errs, nodeSelectorTerm(term.Preference, true, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, podAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, p.Child("podAntiAffinity"))...)
	}
	return errs
}

func podAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, term := range required {
		errs = append(errs, podAffinityTerm(term, p.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, wt := range preferred {
		wp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if wt.Weight <= 0 || wt.Weight > 100 {
			errs = append(errs, field.Invalid(wp.Child("weight"), wt.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, podAffinityTerm(wt.PodAffinityTerm, wp.Child("podAffinityTerm"))...)
	}
	return errs
}

func podAffinityTerm(term corev1.PodAffinityTerm, p *field.Path) field.ErrorList {
	opts := metavalidation.LabelSelectorValidationOptions{}
	errs := metavalidation.ValidateLabelSelector(term.LabelSelector, opts, p.Child("labelSelector"))
	errs = append(errs, metavalidation.ValidateLabelSelector(term.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	for _, name := range term.Namespaces {
		errs = append(errs, Name(apivalidation.ValidateNamespaceName, name, p.Child("namespace"))...)
	}
	errs = append(errs, labelKeys(term.MatchLabelKeys, term.MismatchLabelKeys, term.LabelSelector, p)...)
	if term.TopologyKey == "" {
		errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metavalidation.ValidateLabelName(term.TopologyKey, p.Child("topologyKey"))...)
}

// labelKeys checks the matchLabelKeys and mismatchLabelKeys of a pod
// affinity term or a topology spread constraint, as upstream's
// validateMatchLabelKeysAndMismatchLabelKeys: valid label names, a
// selector to merge them into, and no key both in matchLabelKeys and in
// the user's own selector. A new pod's selector already holds its
// matchLabelKeys as requirements (MergeLabelKeys), so such a key shows
// as a requirement on a key the selector names before; upstream reports
// it at p's index of the key.
func labelKeys(match, mismatch []string, sel *metav1.LabelSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, keys := range []struct {
		list []string
		path *field.Path
	}{{match, p.Child("matchLabelKeys")}, {mismatch, p.Child("mismatchLabelKeys")}} {
		switch {
		case len(keys.list) == 0:
		case sel == nil:
			errs = append(errs, field.Forbidden(keys.path, "must not be specified when labelSelector is not set"))
		default:
			for i, key := range keys.list {
				errs = append(errs, metavalidation.ValidateLabelName(key, keys.path.Index(i))...)
			}
		}
	}
	if sel != nil {
		index := map[string]int{}
		for i, key := range match {
			index[key] = i
		}
		seen := map[string]bool{}
		for key := range sel.MatchLabels {
			seen[key] = true
		}
		for _, req := range sel.MatchExpressions {
			if i, ok := index[req.Key]; ok && seen[req.Key] {
				errs = append(errs, field.Invalid(p.Index(i), req.Key, "exists in both matchLabelKeys and labelSelector"))
			}
			seen[req.Key] = true
		}
	}
	for i, key := range match {
		if slices.Contains(mismatch, key) {
			errs = append(errs, field.Invalid(p.Child("matchLabelKeys").Index(i), key, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

// topologySpread checks topology spread constraints as upstream's
// validateTopologySpreadConstraints.
func topologySpread(constraints []corev1.TopologySpreadConstraint, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range constraints {
		cp := p.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(cp.Child("topologyKey"), "can not be empty"))
		}
		if !slices.Contains(unsatisfiable, c.WhenUnsatisfiable) {
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, unsatisfiable))
		}
		// {topologyKey, whenUnsatisfiable} names one kind of constraint.
		if slices.ContainsFunc(constraints[i+1:], func(o corev1.TopologySpreadConstraint) bool {
			return o.TopologyKey == c.TopologyKey && o.WhenUnsatisfiable == c.WhenUnsatisfiable
		}) {
			errs = append(errs, field.Duplicate(cp.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
		}
		if m := c.MinDomains; m != nil {
			if *m <= 0 {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), m, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), m, fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		errs = append(errs, inclusionPolicy(c.NodeAffinityPolicy, cp.Child("nodeAffinityPolicy"))...)
		errs = append(errs, inclusionPolicy(c.NodeTaintsPolicy, cp.Child("nodeTaintsPolicy"))...)
		errs = append(errs, labelKeys(c.MatchLabelKeys, nil, c.LabelSelector, cp)...)
		errs = append(errs, metavalidation.ValidateLabelSelector(c.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, cp.Child("labelSelector"))...)
	}
	return errs
}

func inclusionPolicy(policy *corev1.NodeInclusionPolicy, p *field.Path) field.ErrorList {
	if policy == nil || slices.Contains(inclusionPolicies, *policy) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, *policy, inclusionPolicies)}
}

// NodeSelector checks a required node selector (pod node affinity, volume
// node affinity).
func NodeSelector(sel *corev1.NodeSelector, p *field.Path) field.ErrorList {
	tp := p.Child("nodeSelectorTerms")
	if len(sel.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(tp, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, term := range sel.NodeSelectorTerms {
		errs = append(errs, nodeSelectorTerm(term, false, tp.Index(i))...)
	}
	return errs
}

// nodeSelectorTerm checks one term; preferred terms tolerate label values
// that could never match.
func nodeSelectorTerm(term corev1.NodeSelectorTerm, anyValue bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, req := range term.MatchExpressions {
		rp := p.Child("matchExpressions").Index(j)
		switch req.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(req.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(req.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), req.Operator, "not a valid selector operator"))
		}
		errs = append(errs, metavalidation.ValidateLabelName(req.Key, rp.Child("key"))...)
		if !anyValue {
			for k, v := range req.Values {
				errs = append(errs, Invalid(rp.Child("values").Index(k), v, validation.IsValidLabelValue(v))...)
			}
		}
	}
	for j, req := range term.MatchFields {
		rp := p.Child("matchFields").Index(j)
		switch req.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(req.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), req.Operator, "not a valid selector operator"))
		}
		if req.Key != metav1.ObjectNameField {
			errs = append(errs, field.Invalid(rp.Child("key"), req.Key, "not a valid field selector key"))
			continue
		}
		for k, v := range req.Values {
			errs = append(errs, Name(apivalidation.NameIsDNSSubdomain, v, rp.Child("values").Index(k))...)
		}
	}
	return errs
}
