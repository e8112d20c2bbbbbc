package speaker

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The speaker's identity: the user of its client certificate, and
// MetalLB's name of its ClusterRole and ClusterRoleBinding.
const (
	User            = "system:metallb-speaker"
	ClusterRoleName = "metallb-system:speaker"
)

// ClusterRole is what the speaker may do: MetalLB's speaker ClusterRole,
// with the reads of MetalLB's configuration that MetalLB grants in a Role
// of metallb-system (cluster-wide here, as that namespace need not exist
// when the cluster starts; the speaker reads metallb-system alone).
func ClusterRole() *rbacv1.ClusterRole {
	read := []string{"get", "list", "watch"}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName, Labels: map[string]string{"app": "metallb"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"metallb.io"}, Verbs: []string{"*"},
				Resources: []string{"servicel2statuses", "servicel2statuses/status", "configurationstates", "configurationstates/status"}},
			{APIGroups: []string{""}, Verbs: read, Resources: []string{"services", "endpoints", "nodes", "namespaces"}},
			{APIGroups: []string{"discovery.k8s.io"}, Verbs: read, Resources: []string{"endpointslices"}},
			{APIGroups: []string{""}, Verbs: []string{"create", "patch"}, Resources: []string{"events"}},
			{APIGroups: []string{"metallb.io"}, Verbs: read,
				Resources: []string{"ipaddresspools", "l2advertisements", "bgppeers", "bgpadvertisements", "communities", "bfdprofiles"}},
		},
	}
}

// ClusterRoleBinding binds ClusterRole to the speaker's user and to the
// nodes' group, so that a node agent that joined with its own credentials
// (system:node:<name>) runs its speaker with them.
func ClusterRoleBinding(nodesGroup string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName, Labels: map[string]string{"app": "metallb"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: User},
			{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodesGroup}},
	}
}
