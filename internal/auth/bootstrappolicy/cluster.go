package bootstrappolicy

import (
	capi "k8s.io/api/certificates/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterRoles returns upstream's default cluster roles (including the
// controller roles system:controller:*), each labelled and annotated as
// upstream. Every call returns fresh objects.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := append(clusterRoles(), controllerRoles()...)
	for i := range roles {
		markDefault(&roles[i].ObjectMeta)
	}
	return roles
}

// ClusterRoleBindings returns upstream's default cluster role bindings,
// including the system:controller:* bindings to kube-system service
// accounts, each labelled and annotated as upstream.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bindings := []rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", group(groupMasters)),
		clusterBinding("system:monitoring", group(groupMonitoring)),
		clusterBinding("system:discovery", group(groupAuthenticated)),
		clusterBinding("system:basic-user", group(groupAuthenticated)),
		clusterBinding("system:public-info-viewer", group(groupAuthenticated), group(groupUnauthenticated)),
		clusterBinding("system:node-proxier", user(userKubeProxy)),
		clusterBinding("system:kube-controller-manager", user(userControllerManager)),
		clusterBinding("system:kube-dns", serviceAccounts("kube-system", "kube-dns")...),
		clusterBinding("system:kube-scheduler", user(userScheduler)),
		clusterBinding("system:volume-scheduler", user(userScheduler)),
		// Deprecated since the Node authorizer (1.7): kept, with no
		// subjects, so that reconciliation can take the subject away.
		clusterBinding("system:node"),
		clusterBinding("system:service-account-issuer-discovery", group(groupServiceAccounts)),
		clusterBinding("system:cluster-trust-bundle-discovery", group(groupServiceAccounts)), // ClusterTrustBundle
	}
	for _, r := range controllerRoles() {
		bindings = append(bindings, clusterBinding(r.Name, serviceAccounts("kube-system", r.Name[len(controllerPrefix):])...))
	}
	for i := range bindings {
		markDefault(&bindings[i].ObjectMeta)
	}
	return bindings
}

// aggregated is admin, edit or view: no rules of its own, only a selector
// of the roles the clusterrole aggregation controller gathers rules from.
func aggregated(name string, labels map[string]string) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: aggregateTo(name)}},
		},
	}
}

func withLabels(r rbacv1.ClusterRole, labels map[string]string) rbacv1.ClusterRole {
	r.Labels = labels
	return r
}

// clusterRoles are the cluster roles other than the controllers'.
func clusterRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		clusterRole("cluster-admin",
			rule("*").groups("*").resources("*"),
			rule("*").urls("*")),
		clusterRole("system:discovery",
			rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		clusterRole("system:monitoring",
			rule("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
				"/livez/*", "/readyz/*", "/healthz/*", "/flagz", "/statusz"), // flagz, statusz: ComponentFlagz, ComponentStatusz
			rule("get").groups(core).resources("nodes/metrics")),
		clusterRole("system:basic-user",
			rule("create").groups(authz).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule("create").groups(authn).resources("selfsubjectreviews")),
		clusterRole("system:public-info-viewer",
			rule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/")),

		aggregated("admin", nil),
		aggregated("edit", aggregateTo("admin")),
		aggregated("view", aggregateTo("edit")),
		withLabels(clusterRole("system:aggregate-to-admin",
			rule("create").groups(authz).resources("localsubjectaccessreviews"),
			rule(readWrite...).groups(rbacGroup).resources("roles", "rolebindings")),
			aggregateTo("admin")),
		withLabels(clusterRole("system:aggregate-to-edit", editRules()...), aggregateTo("edit")),
		withLabels(clusterRole("system:aggregate-to-view", viewRules()...), aggregateTo("view")),
		// What metrics-server's manifest installs, for the metrics.k8s.io
		// svcnet serves itself: `kubectl top` for whoever may view.
		withLabels(clusterRole("system:aggregated-metrics-reader",
			rule("get", "list", "watch").groups(metrics).resources("pods", "nodes")),
			map[string]string{"k8s-app": "metrics-server", "rbac.authorization.k8s.io/aggregate-to-admin": "true",
				"rbac.authorization.k8s.io/aggregate-to-edit": "true", "rbac.authorization.k8s.io/aggregate-to-view": "true"}),

		clusterRole("system:heapster",
			rule(read...).groups(core).resources("events", "pods", "nodes", "namespaces"),
			rule(read...).groups(extensions).resources("deployments")),
		clusterRole("system:node", nodeRules()...),
		clusterRole("system:node-problem-detector",
			rule("get").groups(core).resources("nodes"),
			rule("patch").groups(core).resources("nodes/status"),
			eventsRule()),
		clusterRole("system:node-bootstrapper",
			rule("create", "get", "list", "watch").groups(certificates).resources("certificatesigningrequests")),
		clusterRole("system:auth-delegator",
			rule("create").groups(authn).resources("tokenreviews"),
			rule("create").groups(authz).resources("subjectaccessreviews")),
		clusterRole("system:kube-aggregator",
			rule(read...).groups(core).resources("services", "endpoints")),
		clusterRole("system:kube-controller-manager",
			eventsRule(),
			rule("create").groups(coordination).resources("leases"),
			rule("get", "update").groups(coordination).resources("leases").names("kube-controller-manager"),
			rule("create").groups(core).resources("secrets", "serviceaccounts"),
			rule("delete").groups(core).resources("secrets"),
			rule("get").groups(core).resources("namespaces", "secrets", "serviceaccounts", "configmaps"),
			rule("update").groups(core).resources("secrets", "serviceaccounts"),
			rule("create").groups(authn).resources("tokenreviews"),
			rule("create").groups(authz).resources("subjectaccessreviews"),
			rule("list", "watch").groups("*").resources("*"),
			rule("create").groups(core).resources("serviceaccounts/token")),
		clusterRole("system:kube-dns",
			rule("list", "watch").groups(core).resources("endpoints", "services")),
		clusterRole("system:persistent-volume-provisioner",
			rule("get", "list", "watch", "create", "delete").groups(core).resources("persistentvolumes"),
			rule("get", "list", "watch", "update").groups(core).resources("persistentvolumeclaims"),
			rule(read...).groups(storage).resources("storageclasses"),
			rule("watch").groups(core).resources("events"),
			eventsRule()),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient",
			rule("create").groups(certificates).resources("certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
			rule("create").groups(certificates).resources("certificatesigningrequests/selfnodeclient")),
		clusterRole("system:volume-scheduler",
			rule(readUpdate...).groups(core).resources("persistentvolumes"),
			rule(read...).groups(storage).resources("storageclasses"),
			rule(readUpdate...).groups(core).resources("persistentvolumeclaims")),
		approver("system:certificates.k8s.io:legacy-unknown-approver", capi.LegacyUnknownSignerName),
		approver("system:certificates.k8s.io:kubelet-serving-approver", capi.KubeletServingSignerName),
		approver("system:certificates.k8s.io:kube-apiserver-client-approver", capi.KubeAPIServerClientSignerName),
		approver("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", capi.KubeAPIServerClientKubeletSignerName),
		// Trailing-slash URLs too, for clients generated from older OpenAPI.
		clusterRole("system:service-account-issuer-discovery",
			rule("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:kubelet-api-admin",
			rule("get", "list", "watch").groups(core).resources("nodes"),
			rule("proxy").groups(core).resources("nodes"),
			rule("*").groups(core).resources("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"),
			rule("*").groups(core).resources("nodes/pods", "nodes/healthz", "nodes/configz")), // KubeletFineGrainedAuthz
		clusterRole("system:node-proxier",
			rule("list", "watch").groups(core).resources("services", "endpoints"),
			rule("get", "list", "watch").groups(core).resources("nodes"),
			eventsRule(),
			rule("list", "watch").groups(networking).resources("servicecidrs"), // MultiCIDRServiceAllocator
			rule("list", "watch").groups(discovery).resources("endpointslices")),
		clusterRole("system:kube-scheduler", schedulerRules()...),
		clusterRole("system:cluster-trust-bundle-discovery", // ClusterTrustBundle
			rule(read...).groups(certificates).resources("clustertrustbundles")),
	}
}

func approver(name, signer string) rbacv1.ClusterRole {
	return clusterRole(name, rule("approve").groups(certificates).resources("signers").names(signer))
}

// viewRules are read access to what a namespace's users work with, minus
// secrets and the escalating subresources.
func viewRules() []spec {
	return []spec{
		rule(read...).groups(core).resources("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		rule(read...).groups(core).resources("limitranges", "resourcequotas", "bindings",
			"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
		rule(read...).groups(core).resources("namespaces"),
		rule(read...).groups(core, eventsGroup).resources("events"),
		rule(read...).groups(discovery).resources("endpointslices"),
		rule(read...).groups(apps).resources("controllerrevisions",
			"statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status",
			"deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		rule(read...).groups(autoscaling).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(read...).groups(batch).resources("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		rule(read...).groups(extensions).resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
			"ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale",
			"networkpolicies"),
		rule(read...).groups(policyGroup).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(read...).groups(networking).resources("networkpolicies", "ingresses", "ingresses/status"),
		rule(read...).groups(resource).resources("resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
	}
}

// editRules are write access to the same, plus reading secrets and the
// escalating pod and service subresources.
func editRules() []spec {
	return []spec{
		rule(read...).groups(core).resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		rule("impersonate").groups(core).resources("serviceaccounts"),
		rule(write...).groups(core).resources("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		rule("create").groups(core).resources("pods/eviction"),
		rule(write...).groups(core).resources("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"),
		rule("create").groups(core).resources("serviceaccounts/token"),
		rule(write...).groups(core, eventsGroup).resources("events"),
		rule(write...).groups(apps).resources("statefulsets", "statefulsets/scale", "daemonsets",
			"deployments", "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"),
		rule(write...).groups(autoscaling).resources("horizontalpodautoscalers"),
		rule(write...).groups(batch).resources("jobs", "cronjobs"),
		rule(write...).groups(extensions).resources("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
			"ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
		rule(write...).groups(policyGroup).resources("poddisruptionbudgets"),
		rule(write...).groups(networking).resources("networkpolicies", "ingresses"),
		rule(readWrite...).groups(coordination).resources("leases"),
		rule(write...).groups(resource).resources("resourceclaims", "resourceclaimtemplates"),
	}
}

// nodeRules are the kubelet's; the Node authorizer and the NodeRestriction
// admission plugin narrow most of them to the node's own objects.
// NodeRules are the rules of system:node, which the Node authorizer grants
// every node beside what its graph of pods allows (upstream's NodeRules).
func NodeRules() []rbacv1.PolicyRule { return rules(nodeRules()...) }

func nodeRules() []spec {
	return []spec{
		rule("create").groups(authn).resources("tokenreviews"),
		rule("create").groups(authz).resources("subjectaccessreviews", "localsubjectaccessreviews"),
		rule(read...).groups(core).resources("services"),
		rule("create", "get", "list", "watch").groups(core).resources("nodes"),
		rule("update", "patch").groups(core).resources("nodes/status"),
		rule("update", "patch").groups(core).resources("nodes"),
		rule("create", "update", "patch").groups(core, eventsGroup).resources("events"),
		rule(read...).groups(core).resources("pods"),
		rule("create", "delete").groups(core).resources("pods"),
		rule("update", "patch").groups(core).resources("pods/status"),
		rule("create").groups(core).resources("pods/eviction"),
		rule("get", "list", "watch").groups(core).resources("secrets", "configmaps"),
		rule("get").groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
		rule("get").groups(core).resources("endpoints"),
		rule("create", "get", "list", "watch").groups(certificates).resources("certificatesigningrequests"),
		rule("get", "create", "update", "patch", "delete").groups(coordination).resources("leases"),
		rule("get").groups(storage).resources("volumeattachments"),
		rule("create").groups(core).resources("serviceaccounts/token"),
		rule("get", "update", "patch").groups(core).resources("persistentvolumeclaims/status"),
		rule("get", "watch", "list").groups(storage).resources("csidrivers"),
		rule("get", "create", "update", "patch", "delete").groups(storage).resources("csinodes"),
		rule("get", "list", "watch").groups(nodeGroup).resources("runtimeclasses"),
		rule("get").groups(resource).resources("resourceclaims"),
		rule("deletecollection").groups(resource).resources("resourceslices"),
		rule("get", "list", "watch").groups(certificates).resources("clustertrustbundles"),              // ClusterTrustBundle
		rule("get").groups(core).resources("serviceaccounts"),                                           // KubeletServiceAccountTokenForCredentialProviders
		rule("get", "list", "watch", "create").groups(certificates).resources("podcertificaterequests"), // PodCertificateRequest
	}
}

func schedulerRules() []spec {
	return []spec{
		eventsRule(),
		rule("create").groups(coordination).resources("leases"),
		rule("get", "update", "list", "watch").groups(coordination).resources("leases").names("kube-scheduler"),
		rule(readWrite...).groups(coordination).resources("leasecandidates"),
		rule(read...).groups(core).resources("nodes"),
		rule("get", "list", "watch", "delete").groups(core).resources("pods"),
		rule("create").groups(core).resources("pods/binding", "bindings"),
		rule("patch", "update").groups(core).resources("pods/status"),
		rule(read...).groups(core).resources("services", "replicationcontrollers"),
		rule(read...).groups(apps, extensions).resources("replicasets"),
		rule(read...).groups(apps).resources("statefulsets"),
		rule(read...).groups(policyGroup).resources("poddisruptionbudgets"),
		rule(read...).groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
		rule("create").groups(authn).resources("tokenreviews"),
		rule("create").groups(authz).resources("subjectaccessreviews"),
		rule(read...).groups(storage).resources("csinodes"),
		rule("get", "list", "watch").groups(storage).resources("volumeattachments"),
		rule(read...).groups(core).resources("namespaces"),
		rule(read...).groups(storage).resources("csidrivers"),
		rule(read...).groups(storage).resources("csistoragecapacities"),
		// Dynamic resource allocation.
		rule(read...).groups(resource).resources("deviceclasses"),
		rule(readUpdate...).groups(resource).resources("resourceclaims"),
		rule(readUpdate...).groups(resource).resources("resourceclaims/status"),
		rule("update").groups(core).resources("pods/finalizers"),
		rule(read...).groups(resource).resources("resourceslices"),
		rule("create", "delete").groups(resource).resources("resourceclaims"),        // DRAExtendedResource
		rule(read...).groups(resource).resources("devicetaintrules"),                 // DRADeviceTaintRules
		rule("update", "patch").groups(resource).resources("resourceclaims/binding"), // DRAResourceClaimGranularStatusAuthorization
	}
}
