package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaderLocking is the Role a component leader-elects with, on Leases and
// LeaseCandidates in kube-system.
func leaderLocking(component string) rbacv1.Role {
	verbs := []string{"get", "watch", "list", "create", "update"}
	return role("system::leader-locking-"+component,
		rule(verbs...).groups(coordination).resources("leases"),
		rule(verbs...).groups(coordination).resources("leasecandidates"))
}

// NamespaceRoles returns upstream's default Roles by namespace (kube-system,
// kube-public), each labelled and annotated as upstream.
func NamespaceRoles() map[string][]rbacv1.Role {
	byNS := map[string][]rbacv1.Role{
		metav1.NamespaceSystem: {
			// Aggregated API servers read the client-CA and request-header
			// configuration from this ConfigMap.
			role("extension-apiserver-authentication-reader",
				rule("get", "list", "watch").groups(core).resources("configmaps").names("extension-apiserver-authentication")),
			role(controllerPrefix+"bootstrap-signer",
				rule("get", "list", "watch").groups(core).resources("secrets")),
			// Deprecated since 1.10.
			role(controllerPrefix+"cloud-provider",
				rule("create", "get", "list", "watch").groups(core).resources("configmaps")),
			role(controllerPrefix+"token-cleaner",
				rule("get", "list", "watch", "delete").groups(core).resources("secrets"),
				eventsRule()),
			leaderLocking("kube-controller-manager"),
			leaderLocking("kube-scheduler"),
		},
		metav1.NamespacePublic: {
			// Signs the cluster-info ConfigMap that joining nodes read.
			role(controllerPrefix+"bootstrap-signer",
				rule("get", "list", "watch").groups(core).resources("configmaps"),
				rule("update").groups(core).resources("configmaps").names("cluster-info"),
				eventsRule()),
		},
	}
	for ns, roles := range byNS {
		for i := range roles {
			roles[i].Namespace = ns
			markDefault(&roles[i].ObjectMeta)
		}
	}
	return byNS
}

// NamespaceRoleBindings returns upstream's default RoleBindings by
// namespace (kube-system, kube-public), each labelled and annotated as
// upstream.
func NamespaceRoleBindings() map[string][]rbacv1.RoleBinding {
	sys := metav1.NamespaceSystem
	same := func(name string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
		return roleBinding(name, name, subjects...)
	}
	byNS := map[string][]rbacv1.RoleBinding{
		sys: {
			roleBinding("system::extension-apiserver-authentication-reader", "extension-apiserver-authentication-reader",
				user(userControllerManager), user(userScheduler)),
			same("system::leader-locking-kube-controller-manager",
				append([]rbacv1.Subject{user(userControllerManager)},
					serviceAccounts(sys, "kube-controller-manager", "leader-election-controller")...)...),
			same("system::leader-locking-kube-scheduler",
				append([]rbacv1.Subject{user(userScheduler)}, serviceAccounts(sys, "kube-scheduler")...)...),
			same(controllerPrefix+"bootstrap-signer", serviceAccounts(sys, "bootstrap-signer")...),
			same(controllerPrefix+"cloud-provider", serviceAccounts(sys, "cloud-provider")...),
			same(controllerPrefix+"token-cleaner", serviceAccounts(sys, "token-cleaner")...),
		},
		metav1.NamespacePublic: {
			same(controllerPrefix+"bootstrap-signer", serviceAccounts(sys, "bootstrap-signer")...),
		},
	}
	for ns, bindings := range byNS {
		for i := range bindings {
			bindings[i].Namespace = ns
			markDefault(&bindings[i].ObjectMeta)
		}
	}
	return byNS
}
