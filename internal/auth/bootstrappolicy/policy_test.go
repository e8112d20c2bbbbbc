package bootstrappolicy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/auth/rbac/validation"
)

func clusterRoleNamed(t *testing.T, name string) rbacv1.ClusterRole {
	t.Helper()
	for _, r := range ClusterRoles() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no cluster role %s", name)
	return rbacv1.ClusterRole{}
}

func clusterBindingNamed(t *testing.T, name string) rbacv1.ClusterRoleBinding {
	t.Helper()
	for _, b := range ClusterRoleBindings() {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no cluster role binding %s", name)
	return rbacv1.ClusterRoleBinding{}
}

// allows reports whether rules grant every verb on group/resource.
func allows(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	ok, _ := validation.Covers(rules, []rbacv1.PolicyRule{{Verbs: verbs, APIGroups: []string{group}, Resources: []string{resource}}})
	return ok
}

func allowsURL(rules []rbacv1.PolicyRule, url string) bool {
	ok, _ := validation.Covers(rules, []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{url}}})
	return ok
}

// TestSize pins how many objects and rules the policy has, so that a lost
// role, binding or rule fails here. Upstream's testdata is the reference;
// change these only together with the policy.
func TestSize(t *testing.T) {
	var roles, rules, ctlRoles int
	for _, r := range ClusterRoles() {
		roles++
		rules += len(r.Rules)
		if strings.HasPrefix(r.Name, controllerPrefix) {
			ctlRoles++
		}
	}
	var nsRoles, nsRules, nsBindings int
	for _, rs := range NamespaceRoles() {
		for _, r := range rs {
			nsRoles++
			nsRules += len(r.Rules)
		}
	}
	for _, bs := range NamespaceRoleBindings() {
		nsBindings += len(bs)
	}
	got := []int{roles, ctlRoles, rules, len(ClusterRoleBindings()), nsRoles, nsRules, nsBindings}
	// Upstream's, metrics-server's system:aggregated-metrics-reader and
	// svcnet's system:controller:metallb-controller.
	want := []int{75, 42, 332, 55, 7, 12, 7}
	if !slices.Equal(got, want) {
		t.Errorf("cluster roles, controller roles, rules, cluster role bindings, roles, role rules, role bindings = %v, want %v", got, want)
	}
}

func TestAggregatedRoles(t *testing.T) {
	for _, tc := range []struct{ name, label string }{{"admin", ""}, {"edit", "admin"}, {"view", "edit"}} {
		r := clusterRoleNamed(t, tc.name)
		want := &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + tc.name: "true"}},
		}}
		if !reflect.DeepEqual(r.AggregationRule, want) || r.Rules != nil {
			t.Errorf("%s: aggregationRule %v, rules %v; want %v and no rules", tc.name, r.AggregationRule, r.Rules, want)
		}
		if tc.label != "" && r.Labels["rbac.authorization.k8s.io/aggregate-to-"+tc.label] != "true" {
			t.Errorf("%s is not aggregated into %s: labels %v", tc.name, tc.label, r.Labels)
		}
		part := clusterRoleNamed(t, "system:aggregate-to-"+tc.name)
		if part.AggregationRule != nil || part.Labels["rbac.authorization.k8s.io/aggregate-to-"+tc.name] != "true" {
			t.Errorf("%s: aggregationRule %v, labels %v", part.Name, part.AggregationRule, part.Labels)
		}
	}

	view := clusterRoleNamed(t, "system:aggregate-to-view").Rules
	for _, gr := range [][2]string{{"", "pods"}, {"", "pods/log"}, {"", "services"}, {"", "configmaps"},
		{"apps", "deployments"}, {"discovery.k8s.io", "endpointslices"}, {"networking.k8s.io", "ingresses"}, {"events.k8s.io", "events"}} {
		if !allows(view, gr[0], gr[1], "get", "list", "watch") {
			t.Errorf("view cannot read %s %s", gr[0], gr[1])
		}
	}
	for _, gr := range [][2]string{{"", "secrets"}, {"", "pods/exec"}, {"rbac.authorization.k8s.io", "roles"}} {
		if allows(view, gr[0], gr[1], "get") {
			t.Errorf("view can read %s %s", gr[0], gr[1])
		}
	}
	if allows(view, "", "pods", "create") {
		t.Error("view can create pods")
	}

	edit := clusterRoleNamed(t, "system:aggregate-to-edit").Rules
	if !allows(edit, "", "pods", "create", "delete") || !allows(edit, "", "secrets", "get", "create") ||
		!allows(edit, "apps", "deployments/scale", "patch") || !allows(edit, "coordination.k8s.io", "leases", "get", "create") {
		t.Error("edit lacks a write permission")
	}
	if allows(edit, "rbac.authorization.k8s.io", "rolebindings", "create") || allows(edit, "", "resourcequotas", "update") {
		t.Error("edit can write RBAC or quota")
	}
	admin := clusterRoleNamed(t, "system:aggregate-to-admin").Rules
	if !allows(admin, "rbac.authorization.k8s.io", "rolebindings", "create", "delete") ||
		!allows(admin, "authorization.k8s.io", "localsubjectaccessreviews", "create") {
		t.Error("admin cannot grant permissions")
	}
}

func TestKnownRules(t *testing.T) {
	want := []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}
	if got := clusterRoleNamed(t, "cluster-admin").Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("cluster-admin rules = %v, want %v", got, want)
	}

	discovery := clusterRoleNamed(t, "system:discovery").Rules
	public := clusterRoleNamed(t, "system:public-info-viewer").Rules
	for _, u := range []string{"/version", "/healthz", "/readyz", "/livez"} {
		if !allowsURL(discovery, u) || !allowsURL(public, u) {
			t.Errorf("discovery or public-info-viewer cannot get %s", u)
		}
	}
	if !allowsURL(discovery, "/apis/apps/v1") || !allowsURL(discovery, "/openapi/v3") || allowsURL(public, "/apis") {
		t.Error("discovery must reach /apis and /openapi, public-info-viewer must not")
	}

	for _, tc := range []struct {
		role, group, resource string
		verbs                 []string
	}{
		{"system:node", "", "nodes/status", []string{"patch"}},
		{"system:node", "coordination.k8s.io", "leases", []string{"get", "create", "update"}},
		{"system:node", "storage.k8s.io", "csinodes", []string{"get", "create", "update", "patch", "delete"}},
		{"system:kube-scheduler", "storage.k8s.io", "csinodes", []string{"get", "list", "watch"}},
		{"system:controller:attachdetach-controller", "storage.k8s.io", "csinodes", []string{"get", "list", "watch"}},
		{"system:node-proxier", "discovery.k8s.io", "endpointslices", []string{"list", "watch"}},
		{"system:node-proxier", "networking.k8s.io", "servicecidrs", []string{"list", "watch"}},
		{"system:kube-scheduler", "", "pods/binding", []string{"create"}},
		{"system:kube-controller-manager", "apps", "deployments", []string{"list", "watch"}},
		{"system:kube-dns", "", "services", []string{"list", "watch"}},
		{"system:controller:endpointslice-controller", "discovery.k8s.io", "endpointslices", []string{"create", "update", "delete"}},
		{"system:controller:endpointslice-controller", "", "services/finalizers", []string{"update"}},
		{"system:controller:service-cidrs-controller", "networking.k8s.io", "servicecidrs/status", []string{"patch"}},
		{"system:controller:namespace-controller", "apps", "deployments", []string{"deletecollection"}},
		{"system:controller:clusterrole-aggregation-controller", "rbac.authorization.k8s.io", "clusterroles", []string{"escalate", "update"}},
	} {
		if !allows(clusterRoleNamed(t, tc.role).Rules, tc.group, tc.resource, tc.verbs...) {
			t.Errorf("%s cannot %v %s/%s", tc.role, tc.verbs, tc.group, tc.resource)
		}
	}

	// csinodes/status is CSIVolumeHealth's, off by default: upstream's
	// nodes get no rule for it.
	if allows(NodeRules(), "storage.k8s.io", "csinodes/status", "get") {
		t.Error("nodes may read csinodes/status")
	}

	kcm := clusterRoleNamed(t, "system:kube-controller-manager").Rules
	lease := rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: []string{"coordination.k8s.io"},
		Resources: []string{"leases"}, ResourceNames: []string{"kube-controller-manager"}}
	if !slices.ContainsFunc(kcm, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, lease) }) {
		t.Errorf("kube-controller-manager lacks its named lease rule %v", lease)
	}
}

func TestKnownBindings(t *testing.T) {
	rg := rbacv1.GroupName
	for _, tc := range []struct {
		name string
		want []rbacv1.Subject
	}{
		{"cluster-admin", []rbacv1.Subject{{Kind: "Group", APIGroup: rg, Name: "system:masters"}}},
		{"system:node-proxier", []rbacv1.Subject{{Kind: "User", APIGroup: rg, Name: "system:kube-proxy"}}},
		{"system:public-info-viewer", []rbacv1.Subject{{Kind: "Group", APIGroup: rg, Name: "system:authenticated"},
			{Kind: "Group", APIGroup: rg, Name: "system:unauthenticated"}}},
		{"system:kube-dns", []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "kube-dns"}}},
		{"system:node", nil},
		{"system:controller:endpointslice-controller", []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "endpointslice-controller"}}},
	} {
		b := clusterBindingNamed(t, tc.name)
		if !reflect.DeepEqual(b.Subjects, tc.want) {
			t.Errorf("%s subjects = %v, want %v", tc.name, b.Subjects, tc.want)
		}
		if b.RoleRef != (rbacv1.RoleRef{APIGroup: rg, Kind: "ClusterRole", Name: tc.name}) {
			t.Errorf("%s roleRef = %v", tc.name, b.RoleRef)
		}
	}

	var found bool
	for _, b := range NamespaceRoleBindings()["kube-system"] {
		if b.Name == "system::extension-apiserver-authentication-reader" {
			found = true
			want := []rbacv1.Subject{{Kind: "User", APIGroup: rg, Name: "system:kube-controller-manager"}, {Kind: "User", APIGroup: rg, Name: "system:kube-scheduler"}}
			if b.RoleRef.Name != "extension-apiserver-authentication-reader" || b.RoleRef.Kind != "Role" || !reflect.DeepEqual(b.Subjects, want) {
				t.Errorf("%s: roleRef %v, subjects %v", b.Name, b.RoleRef, b.Subjects)
			}
		}
	}
	if !found {
		t.Error("kube-system lacks system::extension-apiserver-authentication-reader")
	}
}

// TestClusterTrustBundleRules pins the default policy of
// clustertrustbundles to upstream's (testdata/cluster-roles.yaml,
// controller-roles.yaml and their bindings, default feature gates): nodes
// (the kubelet's projected volumes) and every service account may read
// bundles, the API server's serving-bundle publisher may write them and
// attest for kubernetes.io/kube-apiserver-serving, and nothing else but
// cluster-admin may create them or attest (the garbage collector and the
// namespace controller may update and delete any kind); admin, edit and
// view grant nothing of them.
func TestClusterTrustBundleRules(t *testing.T) {
	read := rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}}
	if got := clusterRoleNamed(t, "system:cluster-trust-bundle-discovery").Rules; !reflect.DeepEqual(got, []rbacv1.PolicyRule{read}) {
		t.Errorf("system:cluster-trust-bundle-discovery rules = %v, want %v", got, read)
	}
	if !slices.ContainsFunc(clusterRoleNamed(t, "system:node").Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, read) }) {
		t.Errorf("system:node lacks %v", read)
	}
	if !slices.ContainsFunc(NodeRules(), func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, read) }) {
		t.Errorf("NodeRules lack %v", read)
	}
	discovery := clusterBindingNamed(t, "system:cluster-trust-bundle-discovery")
	if want := []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts"}}; !reflect.DeepEqual(discovery.Subjects, want) {
		t.Errorf("system:cluster-trust-bundle-discovery subjects = %v, want %v", discovery.Subjects, want)
	}

	const publisher = "system:controller:kube-apiserver-serving-clustertrustbundle-publisher"
	want := []rbacv1.PolicyRule{
		{Verbs: []string{"attest"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-serving"}},
		{Verbs: []string{"create", "delete", "list", "update", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}},
		{Verbs: []string{"create", "patch", "update"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	}
	if got := clusterRoleNamed(t, publisher).Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("%s rules = %v, want %v", publisher, got, want)
	}
	if got := clusterBindingNamed(t, publisher).Subjects; !reflect.DeepEqual(got, []rbacv1.Subject{
		{Kind: "ServiceAccount", Namespace: "kube-system", Name: "kube-apiserver-serving-clustertrustbundle-publisher"}}) {
		t.Errorf("%s subjects = %v", publisher, got)
	}

	attest := func(rules []rbacv1.PolicyRule) bool {
		ok, _ := validation.Covers(rules, []rbacv1.PolicyRule{{Verbs: []string{"attest"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"signers"}, ResourceNames: []string{"kubernetes.io/kube-apiserver-serving"}}})
		return ok
	}
	for _, r := range ClusterRoles() {
		writer := r.Name == "cluster-admin" || r.Name == publisher
		if got := allows(r.Rules, "certificates.k8s.io", "clustertrustbundles", "create"); got != writer {
			t.Errorf("%s may create clustertrustbundles: %v, want %v", r.Name, got, writer)
		}
		if got := attest(r.Rules); got != writer {
			t.Errorf("%s may attest for kubernetes.io/kube-apiserver-serving: %v, want %v", r.Name, got, writer)
		}
	}
	for _, name := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		if allows(clusterRoleNamed(t, name).Rules, "certificates.k8s.io", "clustertrustbundles", "get") {
			t.Errorf("%s may read clustertrustbundles", name)
		}
	}
}

// TestWellFormed checks what holds for every object: upstream's label and
// annotation, unique names, bindings that name a default role and have
// subjects (but system:node), and rules in upstream's sorted form.
// TestPodCertificateRequestRules pins the default policy of
// podcertificaterequests to upstream's (testdata/cluster-roles.yaml,
// controller-roles.yaml and their bindings, default feature gates):
// nodes may get, list, watch and create requests (the Node authorizer
// narrows that to their own), the cleaner may read and delete them, and
// no other role but cluster-admin touches them or their status, nor may
// any sign for a signer of its own: a signer is granted "sign" on it
// by whoever runs it.
func TestPodCertificateRequestRules(t *testing.T) {
	node := rbacv1.PolicyRule{Verbs: []string{"create", "get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests"}}
	if !slices.ContainsFunc(clusterRoleNamed(t, "system:node").Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, node) }) {
		t.Errorf("system:node lacks %v", node)
	}
	if !slices.ContainsFunc(NodeRules(), func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, node) }) {
		t.Errorf("NodeRules lack %v", node)
	}
	const cleaner = "system:controller:podcertificaterequestcleaner"
	want := []rbacv1.PolicyRule{{Verbs: []string{"delete", "get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"podcertificaterequests"}}}
	if got := clusterRoleNamed(t, cleaner).Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("%s rules = %v, want %v", cleaner, got, want)
	}
	if got := clusterBindingNamed(t, cleaner).Subjects; !reflect.DeepEqual(got, []rbacv1.Subject{
		{Kind: "ServiceAccount", Namespace: "kube-system", Name: "podcertificaterequestcleaner"}}) {
		t.Errorf("%s subjects = %v", cleaner, got)
	}
	// The garbage collector and the namespace controller may delete (the
	// collector update too) any kind, as upstream's.
	anyKind := map[string]bool{"cluster-admin": true, "system:controller:generic-garbage-collector": true, "system:controller:namespace-controller": true}
	for _, r := range ClusterRoles() {
		if got, want := allows(r.Rules, "certificates.k8s.io", "podcertificaterequests", "delete"), anyKind[r.Name] || r.Name == cleaner; got != want {
			t.Errorf("%s may delete podcertificaterequests: %v, want %v", r.Name, got, want)
		}
		if got, want := allows(r.Rules, "certificates.k8s.io", "podcertificaterequests", "create"), r.Name == "cluster-admin" || r.Name == "system:node"; got != want {
			t.Errorf("%s may create podcertificaterequests: %v, want %v", r.Name, got, want)
		}
		if got, want := allows(r.Rules, "certificates.k8s.io", "podcertificaterequests/status", "update"), r.Name == "cluster-admin" || r.Name == "system:controller:generic-garbage-collector"; got != want {
			t.Errorf("%s may update podcertificaterequests/status: %v, want %v", r.Name, got, want)
		}
	}
}

func TestWellFormed(t *testing.T) {
	type object struct {
		kind string
		meta metav1.ObjectMeta
	}
	var objects []object
	clusterRoles := map[string]bool{}
	for _, r := range ClusterRoles() {
		objects = append(objects, object{"ClusterRole", r.ObjectMeta})
		clusterRoles[r.Name] = true
		checkRules(t, r.Name, r.Rules)
	}
	for _, b := range ClusterRoleBindings() {
		objects = append(objects, object{"ClusterRoleBinding", b.ObjectMeta})
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.APIGroup != rbacv1.GroupName || !clusterRoles[b.RoleRef.Name] {
			t.Errorf("cluster role binding %s: bad roleRef %v", b.Name, b.RoleRef)
		}
		if len(b.Subjects) == 0 && b.Name != "system:node" {
			t.Errorf("cluster role binding %s has no subjects", b.Name)
		}
	}
	for _, r := range ClusterRoles() {
		if strings.HasPrefix(r.Name, controllerPrefix) && !slices.ContainsFunc(ClusterRoleBindings(), func(b rbacv1.ClusterRoleBinding) bool {
			return b.RoleRef.Name == r.Name
		}) {
			t.Errorf("controller role %s is not bound", r.Name)
		}
	}
	roles := map[string]bool{}
	for ns, rs := range NamespaceRoles() {
		for _, r := range rs {
			objects = append(objects, object{"Role", r.ObjectMeta})
			roles[ns+"/"+r.Name] = true
			checkRules(t, ns+"/"+r.Name, r.Rules)
			if r.Namespace != ns {
				t.Errorf("role %s/%s listed under %s", r.Namespace, r.Name, ns)
			}
		}
	}
	for ns, bs := range NamespaceRoleBindings() {
		for _, b := range bs {
			objects = append(objects, object{"RoleBinding", b.ObjectMeta})
			if b.Namespace != ns || b.RoleRef.Kind != "Role" || !roles[ns+"/"+b.RoleRef.Name] || len(b.Subjects) == 0 {
				t.Errorf("role binding %s/%s: roleRef %v, subjects %v", b.Namespace, b.Name, b.RoleRef, b.Subjects)
			}
		}
	}

	seen := map[string]bool{}
	for _, o := range objects {
		key := o.kind + " " + o.meta.Namespace + "/" + o.meta.Name
		if seen[key] {
			t.Errorf("duplicate %s", key)
		}
		seen[key] = true
		if o.meta.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" {
			t.Errorf("%s lacks the bootstrapping label: %v", key, o.meta.Labels)
		}
		if o.meta.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "true" {
			t.Errorf("%s lacks the autoupdate annotation: %v", key, o.meta.Annotations)
		}
	}
}

func checkRules(t *testing.T, owner string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, r := range rules {
		for _, list := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
			if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
				t.Errorf("%s: rule %v is not in sorted form", owner, r)
			}
		}
	}
}

// TestFresh checks that callers cannot change the policy for one another.
func TestFresh(t *testing.T) {
	ClusterRoles()[0].Rules[0].Verbs[0] = "changed"
	ClusterRoleBindings()[0].Labels["x"] = "y"
	NamespaceRoles()["kube-system"][0].Rules = nil
	if ClusterRoles()[0].Rules[0].Verbs[0] == "changed" || ClusterRoleBindings()[0].Labels["x"] == "y" ||
		NamespaceRoles()["kube-system"][0].Rules == nil {
		t.Error("policy objects are shared between calls")
	}
}

func TestMalformedRulePanics(t *testing.T) {
	for _, s := range []spec{
		rule().groups(core).resources("pods"),
		rule("get").resources("pods"),
		rule("get").groups(core).resources("pods").urls("/x"),
		rule("get").groups(core).urls("/x"),
		rule("get").groups(core),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("rule %+v accepted", s)
				}
			}()
			rules(s)
		}()
	}
}
