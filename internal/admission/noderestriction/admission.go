// Package noderestriction is kube-apiserver's NodeRestriction admission
// plugin: a node (system:node:<name>) may write only its own Node (not its
// taints, nor labels outside the kubelet's set), mirror pods bound to
// itself that reference no other object, the status of its own pods, its
// own Lease and CSINode (not the CSINode's status), tokens bound to its
// own pods, and PodCertificateRequests for its own pods' podCertificate
// projections. The Node authorizer lets a node make these writes at all;
// this plugin narrows them to its objects, in upstream's words.
package noderestriction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/svcnet/svcnet/internal/admission"
	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/podutil"
)

// PluginName is the plugin's name in --enable-admission-plugins.
const PluginName = "NodeRestriction"

// Plugin is the NodeRestriction admission plugin.
type Plugin struct {
	pods            corelisters.PodLister
	nodes           corelisters.NodeLister
	serviceAccounts corelisters.ServiceAccountLister
	// authorizer is the API server's, which may let a node request pod
	// certificates of a signer its pod's projections do not name.
	authorizer authz.Authorizer
}

var _ admission.Plugin = (*Plugin)(nil)

// New is the plugin, reading pods, nodes and service accounts from the
// API server's caches and asking authorizer (nil allows nothing) what
// the pods alone do not allow.
func New(pods corelisters.PodLister, nodes corelisters.NodeLister, serviceAccounts corelisters.ServiceAccountLister, authorizer authz.Authorizer) *Plugin {
	return &Plugin{pods: pods, nodes: nodes, serviceAccounts: serviceAccounts, authorizer: authorizer}
}

var (
	podResource     = schema.GroupResource{Resource: "pods"}
	nodeResource    = schema.GroupResource{Resource: "nodes"}
	claimResource   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	accountResource = schema.GroupResource{Resource: "serviceaccounts"}
	leaseResource   = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodeResource = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
	pcrResource     = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "podcertificaterequests"}
)

// Validate implements admission.Plugin.
func (p *Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	node, isNode := nodeauthorizer.Identity(a.User)
	if !isNode {
		return nil
	}
	if node == "" {
		return admission.Forbidden(a, fmt.Errorf("could not determine node from user %q", a.User.GetName()))
	}
	switch a.Resource {
	case podResource:
		switch a.Subresource {
		case "":
			return p.admitPod(node, a)
		case "status":
			return admitPodStatus(node, a)
		case "eviction":
			return p.admitEviction(node, a)
		default:
			return admission.Forbidden(a, fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource))
		}
	case nodeResource:
		return admitNode(node, a)
	case claimResource:
		if a.Subresource != "status" {
			return admission.Forbidden(a, errors.New("may only update PVC status"))
		}
		return admitClaimStatus(node, a)
	case accountResource:
		return p.admitToken(node, a)
	case pcrResource:
		return p.admitPodCertificateRequest(ctx, node, a)
	case leaseResource:
		if a.Namespace != corev1.NamespaceNodeLease {
			return admission.Forbidden(a, fmt.Errorf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
		}
		return admitOwnName(node, a, "node lease")
	case csiNodeResource:
		if err := admitOwnName(node, a, "CSINode"); err != nil {
			return err
		}
		// csinodes/status is CSIVolumeHealth's, an alpha feature that is
		// off, as upstream's default.
		if a.Subresource == "status" {
			return admission.Forbidden(a, errors.New("CSIVolumeHealth feature gate is disabled"))
		}
		return nil
	}
	return nil
}

func unexpected(a *admission.Attributes, obj any) error {
	return admission.Forbidden(a, fmt.Errorf("unexpected type %T", obj))
}

// existingPod is the pod a delete or eviction names, from the cache.
func (p *Plugin) existingPod(a *admission.Attributes, name string) (*corev1.Pod, error) {
	pod, err := p.pods.Pods(a.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, admission.Forbidden(a, err)
	}
	return pod, nil
}

func (p *Plugin) admitPod(node string, a *admission.Attributes) error {
	switch a.Operation {
	case admission.Create:
		pod, ok := a.Object.(*corev1.Pod)
		if !ok {
			return unexpected(a, a.Object)
		}
		return p.admitMirrorPod(node, a, pod)
	case admission.Delete:
		pod, err := p.existingPod(a, a.Name)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != node {
			return admission.Forbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", node))
		}
		return nil
	}
	return admission.Forbidden(a, fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, node))
}

// admitMirrorPod lets a node create only mirror pods bound to itself,
// owned by its Node, that reference no other API object.
func (p *Plugin) admitMirrorPod(node string, a *admission.Attributes, pod *corev1.Pod) error {
	forbid := func(format string, args ...any) error {
		return admission.Forbidden(a, fmt.Errorf(format, args...))
	}
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return forbid("pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, node)
	}
	if pod.Spec.NodeName != node {
		return forbid("node %q can only create pods with spec.nodeName set to itself", node)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return forbid("node %q can only create pods with an owner reference set to itself", node)
	case 1:
	default:
		return forbid("node %q can only create pods with a single owner reference set to itself", node)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
		return forbid("node %q can only create pods with an owner reference set to itself", node)
	}
	if owner.Controller == nil || !*owner.Controller {
		return forbid("node %q can only create pods with a controller owner reference set to itself", node)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return forbid("node %q must not set blockOwnerDeletion on an owner reference", node)
	}
	n, err := p.nodes.Get(node)
	if apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return forbid("error looking up node %s to verify uid: %v", node, err)
	}
	if owner.UID != n.UID {
		return forbid("node %s UID mismatch: expected %s got %s", node, owner.UID, n.UID)
	}
	switch {
	case pod.Spec.ServiceAccountName != "":
		return forbid("node %q can not create pods that reference a service account", node)
	case len(podutil.Secrets(pod)) > 0:
		return forbid("node %q can not create pods that reference secrets", node)
	case len(podutil.ConfigMaps(pod)) > 0:
		return forbid("node %q can not create pods that reference configmaps", node)
	case projects(pod, func(s *corev1.VolumeProjection) bool { return s.ClusterTrustBundle != nil }):
		return forbid("node %q can not create pods that reference clustertrustbundles", node)
	case projects(pod, func(s *corev1.VolumeProjection) bool { return s.PodCertificate != nil }):
		return forbid("node %q can not create pods that reference podcertificates", node)
	case slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil }):
		return forbid("node %q can not create pods that reference persistentvolumeclaims", node)
	}
	return nil
}

// projects reports whether a projected volume of the pod has a source
// that is.
func projects(pod *corev1.Pod, is func(*corev1.VolumeProjection) bool) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for i := range v.Projected.Sources {
			if is(&v.Projected.Sources[i]) {
				return true
			}
		}
	}
	return false
}

func admitPodStatus(node string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok {
		return unexpected(a, a.OldObject)
	}
	if old.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", node))
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return unexpected(a, a.Object)
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return admission.Forbidden(a, fmt.Errorf("node %q cannot update labels through pod status", node))
	}
	if !apiequality.Semantic.DeepEqual(claimNames(old), claimNames(pod)) {
		return admission.Forbidden(a, fmt.Errorf("node %q cannot update resource claim statues", node))
	}
	return nil
}

// claimNames are the pod's resource claim statuses without what a node
// may not change: which claim each names.
func claimNames(pod *corev1.Pod) []corev1.PodResourceClaimStatus {
	out := make([]corev1.PodResourceClaimStatus, len(pod.Status.ResourceClaimStatuses))
	for i, s := range pod.Status.ResourceClaimStatuses {
		out[i] = corev1.PodResourceClaimStatus{Name: s.Name, ResourceClaimName: s.ResourceClaimName}
	}
	return out
}

func (p *Plugin) admitEviction(node string, a *admission.Attributes) error {
	if a.Operation != admission.Create {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %s", a.Operation))
	}
	name := a.Name
	if name == "" {
		if acc, err := meta.Accessor(a.Object); err == nil {
			name = acc.GetName()
		}
	}
	if name == "" {
		return admission.Forbidden(a, errors.New("could not determine pod from request data"))
	}
	pod, err := p.existingPod(a, name)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node %s can only evict pods with spec.nodeName set to itself", node))
	}
	return nil
}

func admitClaimStatus(node string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok {
		return unexpected(a, a.OldObject)
	}
	claim, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return unexpected(a, a.Object)
	}
	strip := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c = c.DeepCopy()
		c.ResourceVersion, c.ManagedFields = "", nil
		c.Status.Capacity, c.Status.Conditions = nil, nil
		c.Status.AllocatedResourceStatuses, c.Status.AllocatedResources = nil, nil
		return c
	}
	if !apiequality.Semantic.DeepEqual(strip(old), strip(claim)) {
		return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to update fields other than status.capacity and status.conditions", node))
	}
	return nil
}

func admitNode(node string, a *admission.Attributes) error {
	if a.Name != node {
		return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", node, a.Name))
	}
	switch a.Operation {
	case admission.Create:
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return unexpected(a, a.Object)
		}
		if n.Spec.ConfigSource != nil {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", node))
		}
		if bad := forbiddenLabels(n.Labels, nil); len(bad) > 0 {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to set the following labels: %s", node, strings.Join(bad, ", ")))
		}
	case admission.Update:
		n, ok := a.Object.(*corev1.Node)
		if !ok {
			return unexpected(a, a.Object)
		}
		old, ok := a.OldObject.(*corev1.Node)
		if !ok {
			return unexpected(a, a.Object)
		}
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", node))
		}
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to modify taints", node))
		}
		if bad := forbiddenLabels(n.Labels, old.Labels); len(bad) > 0 {
			return admission.Forbidden(a, fmt.Errorf("is not allowed to modify labels: %s", strings.Join(bad, ", ")))
		}
	}
	return nil
}

// forbiddenLabels are the labels added, removed or changed between now
// and before that a node may not set: node-restriction.kubernetes.io/
// ones, and kubernetes.io or k8s.io ones the kubelet does not set itself.
func forbiddenLabels(now, before map[string]string) []string {
	var bad []string
	changed := func(k string) bool {
		v1, ok1 := now[k]
		v2, ok2 := before[k]
		return ok1 != ok2 || v1 != v2
	}
	for _, m := range []map[string]string{now, before} {
		for k := range m {
			if !changed(k) || slices.Contains(bad, k) {
				continue
			}
			ns := ""
			if before, _, ok := strings.Cut(k, "/"); ok {
				ns = before
			}
			restricted := ns == corev1.LabelNamespaceNodeRestriction || strings.HasSuffix(ns, "."+corev1.LabelNamespaceNodeRestriction)
			if restricted || kubernetesLabel(ns) && !kubeletapis.IsKubeletLabel(k) {
				bad = append(bad, k)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func kubernetesLabel(ns string) bool {
	return ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io")
}

// admitToken lets a node request only tokens bound to a pod of its own.
func (p *Plugin) admitToken(node string, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "token" {
		return nil
	}
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return unexpected(a, a.Object)
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return admission.Forbidden(a, errors.New("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return admission.Forbidden(a, errors.New("node requested token with a pod binding without a uid"))
	}
	pod, err := p.existingPod(a, ref.Name)
	if err != nil {
		return err
	}
	if ref.UID != pod.UID {
		return admission.Forbidden(a, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != node {
		return admission.Forbidden(a, errors.New("node requested token bound to a pod scheduled on a different node"))
	}
	return nil
}

// admitOwnName lets a node write only the object named after it (its
// Lease, its CSINode).
func admitOwnName(node string, a *admission.Attributes, what string) error {
	name := a.Name
	if a.Operation == admission.Create {
		acc, err := meta.Accessor(a.Object)
		if err != nil {
			return admission.Forbidden(a, errors.New("unable to access the object name"))
		}
		name = acc.GetName()
	}
	if name != node {
		return admission.Forbidden(a, fmt.Errorf("can only access %s with the same name as the requesting node", what))
	}
	return nil
}
