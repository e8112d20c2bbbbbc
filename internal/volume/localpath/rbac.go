package localpath

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The provisioners' RBAC: local-path-provisioner's ClusterRole and
// binding names, and the kube-system ServiceAccount the shared
// provisioner runs as in the controller manager.
const (
	ClusterRoleName = "local-path-provisioner-role"
	BindingName     = "local-path-provisioner-bind"
	ServiceAccount  = "local-path-provisioner-service-account"
)

// ClusterRole is what a provisioner may do: read claims and classes,
// make and delete volumes, resize them and record claims' sizes, and
// write events.
func ClusterRole() *rbacv1.ClusterRole {
	read := []string{"get", "list", "watch"}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Verbs: read, Resources: []string{"persistentvolumeclaims", "nodes"}},
			{APIGroups: []string{""}, Verbs: []string{"update", "patch"}, Resources: []string{"persistentvolumeclaims/status"}},
			{APIGroups: []string{""}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}, Resources: []string{"persistentvolumes"}},
			{APIGroups: []string{"storage.k8s.io"}, Verbs: read, Resources: []string{"storageclasses"}},
			{APIGroups: []string{""}, Verbs: []string{"create", "patch"}, Resources: []string{"events"}},
		},
	}
}

// ClusterRoleBinding binds ClusterRole to the nodes' group, whose agents
// run the node-local provisioner with their own credentials, and to the
// shared provisioner's ServiceAccount in namespace.
func ClusterRoleBinding(nodesGroup, namespace string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: BindingName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: nodesGroup},
			{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: namespace}},
	}
}
