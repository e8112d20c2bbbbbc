// Package nodeauthorizer is kube-apiserver's Node authorizer
// (--authorization-mode=Node): a node, the user system:node:<name> in
// group system:nodes, may read the Secrets, ConfigMaps, claims, volumes
// and ResourceClaims of the pods bound to it, get their service accounts
// and mint tokens for them, list and watch its own pods and
// PodCertificateRequests, and touch its own Node and Lease; everything
// else it may do is system:node's static rules. What
// relates an object to a node is read from the API server's pod and claim
// caches at each request (upstream keeps a graph of the same edges).
// Writes within those rights are narrowed further by the NodeRestriction
// admission plugin.
package nodeauthorizer

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/rbac"
	"github.com/svcnet/svcnet/internal/podutil"
)

// Node users, as upstream's node identifier.
const (
	UserPrefix = "system:node:"
	Group      = "system:nodes"
)

// Identity returns the node a user is: isNode when the user is in
// system:nodes and named system:node:<name> (name "" when the name does
// not say which node).
func Identity(u user.Info) (name string, isNode bool) {
	if u == nil {
		return "", false
	}
	n, ok := strings.CutPrefix(u.GetName(), UserPrefix)
	if !ok || !slices.Contains(u.GetGroups(), Group) {
		return "", false
	}
	return n, true
}

// NodeNameIndex indexes pods by spec.nodeName; the authorizer's pod
// indexer must have it.
const NodeNameIndex = "spec.nodeName"

// Indexers are the pod informer's indexers the authorizer needs.
var Indexers = cache.Indexers{NodeNameIndex: func(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}}

// Authorizer is the Node authorizer.
type Authorizer struct {
	// Pods are the cluster's pods, indexed by NodeNameIndex.
	Pods cache.Indexer
	// Claims are the cluster's PersistentVolumeClaims.
	Claims corelisters.PersistentVolumeClaimLister
	// PodCertificateRequests are the cluster's PodCertificateRequests; a
	// node may get those of its spec.nodeName. Nil relates none.
	PodCertificateRequests certlisters.PodCertificateRequestLister
	// Rules are what every node may do (system:node's rules).
	Rules []rbacv1.PolicyRule
}

var (
	secrets         = schema.GroupResource{Resource: "secrets"}
	configMaps      = schema.GroupResource{Resource: "configmaps"}
	pods            = schema.GroupResource{Resource: "pods"}
	nodes           = schema.GroupResource{Resource: "nodes"}
	claims          = schema.GroupResource{Resource: "persistentvolumeclaims"}
	volumes         = schema.GroupResource{Resource: "persistentvolumes"}
	serviceAccounts = schema.GroupResource{Resource: "serviceaccounts"}
	leases          = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	csiNodes        = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
	attachments     = schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}
	resourceClaims  = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}
	podCertificates = schema.GroupResource{Group: "certificates.k8s.io", Resource: "podcertificaterequests"}
)

// related reports whether the object named in a relates to node.
type related func(node string, a authz.Attributes) bool

// Authorize implements authz.Authorizer with upstream's decisions and
// reasons.
func (z *Authorizer) Authorize(_ context.Context, a authz.Attributes) (authz.Decision, string, error) {
	node, isNode := Identity(a.User)
	if !isNode {
		return authz.NoOpinion, "", nil
	}
	if node == "" {
		return authz.NoOpinion, fmt.Sprintf("unknown node for user %q", a.User.GetName()), nil
	}
	if a.ResourceRequest {
		switch (schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}) {
		case secrets:
			return z.readNamespaced(node, a, z.podUses(podutil.Secrets))
		case configMaps:
			return z.readNamespaced(node, a, z.podUses(podutil.ConfigMaps))
		case claims:
			if a.Subresource == "status" {
				return z.statusUpdate(node, a, z.podUses(podutil.Claims))
			}
			return z.get(node, a, z.podUses(podutil.Claims))
		case volumes:
			return z.get(node, a, z.volumeOfPod)
		case attachments:
			// svcnet does not serve them: nothing relates to a node.
			return z.get(node, a, func(string, authz.Attributes) bool { return false })
		case resourceClaims:
			return z.get(node, a, z.podUses(podutil.ResourceClaims))
		case serviceAccounts:
			if a.Verb == "get" && a.Subresource == "" {
				// The pod certificate manager reads a pod's service
				// account for its UID.
				return z.readNamespaced(node, a, z.podUses(serviceAccountOf))
			}
			return z.createToken(node, a)
		case leases:
			return ownObject(node, a, "node lease", corev1.NamespaceNodeLease)
		case csiNodes:
			return ownCSINode(node, a)
		case nodes:
			return authorizeNode(node, a)
		case pods:
			return z.authorizePod(node, a)
		case podCertificates:
			return z.authorizePodCertificateRequest(node, a)
		}
	}
	for i := range z.Rules {
		if rbac.RuleAllows(a, &z.Rules[i]) {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

// podsOn are the pods bound to node.
func (z *Authorizer) podsOn(node string) []*corev1.Pod {
	objs, err := z.Pods.ByIndex(NodeNameIndex, node)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// podUses relates an object to the nodes of the pods in its namespace
// whose names (of the kind refs lists) include it.
func (z *Authorizer) podUses(refs func(*corev1.Pod) []string) related {
	return func(node string, a authz.Attributes) bool {
		return slices.ContainsFunc(z.podsOn(node), func(p *corev1.Pod) bool {
			return p.Namespace == a.Namespace && slices.Contains(refs(p), a.Name)
		})
	}
}

// volumeOfPod relates a PersistentVolume to the nodes of the pods whose
// claims are bound to it.
func (z *Authorizer) volumeOfPod(node string, a authz.Attributes) bool {
	for _, p := range z.podsOn(node) {
		for _, name := range podutil.Claims(p) {
			if c, err := z.Claims.PersistentVolumeClaims(p.Namespace).Get(name); err == nil && c.Spec.VolumeName == a.Name {
				return true
			}
		}
	}
	return false
}

func (z *Authorizer) authorize(node string, a authz.Attributes, rel related) (authz.Decision, string, error) {
	if a.Name == "" {
		return authz.NoOpinion, "No Object name found", nil
	}
	if !rel(node, a) {
		return authz.NoOpinion, noRelationship(node), nil
	}
	return authz.Allow, "", nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// readNamespaced allows get, list and watch of one related object (a list
// or watch names it by its metadata.name field selector).
func (z *Authorizer) readNamespaced(node string, a authz.Attributes, rel related) (authz.Decision, string, error) {
	switch {
	case a.Verb != "get" && a.Verb != "list" && a.Verb != "watch":
		return authz.NoOpinion, "can only read resources of this type", nil
	case a.Subresource != "":
		return authz.NoOpinion, "cannot read subresource", nil
	case a.Namespace == "":
		return authz.NoOpinion, "can only read namespaced object of this type", nil
	}
	return z.authorize(node, a, rel)
}

// get allows a get of one related object.
func (z *Authorizer) get(node string, a authz.Attributes, rel related) (authz.Decision, string, error) {
	switch {
	case a.Verb != "get":
		return authz.NoOpinion, "can only get individual resources of this type", nil
	case a.Subresource != "":
		return authz.NoOpinion, "cannot get subresource", nil
	}
	return z.authorize(node, a, rel)
}

// statusUpdate allows an update or patch of a related object's status.
func (z *Authorizer) statusUpdate(node string, a authz.Attributes, rel related) (authz.Decision, string, error) {
	if a.Verb != "update" && a.Verb != "patch" {
		return authz.NoOpinion, "can only get/update/patch this type", nil
	}
	return z.authorize(node, a, rel)
}

// createToken allows a TokenRequest for the service account of a pod
// bound to the node.
func (z *Authorizer) createToken(node string, a authz.Attributes) (authz.Decision, string, error) {
	if a.Verb != "create" || a.Name == "" {
		return authz.NoOpinion, "can only create tokens for individual service accounts", nil
	}
	if a.Subresource != "token" {
		return authz.NoOpinion, "can only create token subresource of serviceaccount", nil
	}
	return z.authorize(node, a, z.podUses(serviceAccountOf))
}

// serviceAccountOf names the pod's service account.
func serviceAccountOf(p *corev1.Pod) []string { return []string{p.Spec.ServiceAccountName} }

// ownObject allows what a node does with the object named after it: its
// Lease in kube-node-lease, its CSINode. A create is let through (the name
// is in the body, which NodeRestriction checks).
func ownObject(node string, a authz.Attributes, what, namespace string) (authz.Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return authz.NoOpinion, fmt.Sprintf("can only get, create, update, patch, or delete a %s", what), nil
	}
	if namespace != "" && a.Namespace != namespace {
		return authz.NoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", namespace), nil
	}
	if a.Verb != "create" && a.Name != node {
		return authz.NoOpinion, fmt.Sprintf("can only access %s with the same name as the requesting node", what), nil
	}
	return authz.Allow, "", nil
}

// ownCSINode is ownObject for a node's CSINode, with upstream's rule for
// its subresources: csinodes/status is for CSIVolumeHealth, an alpha
// feature that is off, and there are no others.
func ownCSINode(node string, a authz.Attributes) (authz.Decision, string, error) {
	switch a.Subresource {
	case "":
		return ownObject(node, a, "CSINode", "")
	case "status":
		return authz.NoOpinion, "CSINode status access requires CSIVolumeHealth feature", nil
	}
	return authz.NoOpinion, "cannot authorize CSINode subresources", nil
}

// authorizeNode lets a node write Nodes (NodeRestriction keeps it to its
// own) and read only its own.
func authorizeNode(node string, a authz.Attributes) (authz.Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return authz.Allow, "", nil
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return authz.Allow, "", nil
			case "":
				return authz.NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return authz.NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

// authorizePod lets a node read its pods (a list or watch selecting
// spec.nodeName=<node>), create and delete pods and write pod status and
// evictions (NodeRestriction keeps these to its own pods).
func (z *Authorizer) authorizePod(node string, a authz.Attributes) (authz.Decision, string, error) {
	onNode := func(node string, a authz.Attributes) bool {
		return slices.ContainsFunc(z.podsOn(node), func(p *corev1.Pod) bool {
			return p.Namespace == a.Namespace && p.Name == a.Name
		})
	}
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return z.get(node, a, onNode)
		case "list", "watch":
			if a.FieldSelector != nil {
				if v, ok := a.FieldSelector.RequiresExactMatch("spec.nodeName"); ok && v == node {
					return authz.Allow, "", nil
				}
			}
			if a.Name != "" {
				return z.authorize(node, a, onNode)
			}
			return authz.NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return authz.Allow, "", nil
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return authz.Allow, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return authz.Allow, "", nil
		}
	}
	return authz.NoOpinion, "", nil
}

// authorizePodCertificateRequest is upstream's: a node may create
// PodCertificateRequests (NodeRestriction narrows that to its own pods),
// get one naming it in spec.nodeName, and list or watch those selecting
// spec.nodeName=<node>; nothing else, and never the status.
func (z *Authorizer) authorizePodCertificateRequest(node string, a authz.Attributes) (authz.Decision, string, error) {
	if a.Subresource != "" {
		return authz.NoOpinion, "nodes may not access the status subresource of PodCertificateRequests", nil
	}
	switch a.Verb {
	case "create":
		return authz.Allow, "", nil
	case "get":
		return z.authorize(node, a, func(node string, a authz.Attributes) bool {
			if z.PodCertificateRequests == nil {
				return false
			}
			r, err := z.PodCertificateRequests.PodCertificateRequests(a.Namespace).Get(a.Name)
			return err == nil && string(r.Spec.NodeName) == node
		})
	case "list", "watch":
		if a.FieldSelector != nil {
			if v, ok := a.FieldSelector.RequiresExactMatch("spec.nodeName"); ok && v == node {
				return authz.Allow, "", nil
			}
		}
		return authz.NoOpinion, "can only list/watch podcertificaterequests with nodeName field selector", nil
	}
	return authz.NoOpinion, fmt.Sprintf("nodes may not %s podcertificaterequests", a.Verb), nil
}
