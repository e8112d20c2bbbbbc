package cluster

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/svcnet/svcnet/internal/auth/authz"
	"github.com/svcnet/svcnet/internal/auth/rbac"
)

// TestSpeakerRBAC: the speaker's user and a joined node may do what the
// speaker does, and no more than MetalLB's speaker may.
func TestSpeakerRBAC(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	if err := ensureSpeakerRBAC(ctx, cs); err != nil {
		t.Fatal(err)
	}
	// A changed role is put back.
	cr, _ := cs.RbacV1().ClusterRoles().Get(ctx, "metallb-system:speaker", metav1.GetOptions{})
	cr.Rules = cr.Rules[:1]
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ensureSpeakerRBAC(ctx, cs); err != nil {
		t.Fatal(err)
	}
	crs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	crbs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	cr, _ = cs.RbacV1().ClusterRoles().Get(ctx, "metallb-system:speaker", metav1.GetOptions{})
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "metallb-system:speaker", metav1.GetOptions{})
	if err != nil || crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metallb-system:speaker"}) {
		t.Fatalf("binding %+v, %v", crb, err)
	}
	if err := crs.Add(cr); err != nil {
		t.Fatal(err)
	}
	if err := crbs.Add(crb); err != nil {
		t.Fatal(err)
	}
	a := rbac.New(rbac.Listers{Roles: rbaclisters.NewRoleLister(empty), RoleBindings: rbaclisters.NewRoleBindingLister(empty),
		ClusterRoles: rbaclisters.NewClusterRoleLister(crs), ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(crbs)})
	for _, u := range []user.Info{
		&user.DefaultInfo{Name: "system:metallb-speaker"},
		&user.DefaultInfo{Name: "system:node:joined", Groups: []string{"system:nodes"}},
	} {
		for _, tc := range []struct {
			verb, ns, group, resource, sub string
			allowed                        bool
		}{
			{"watch", "", "", "services", "", true},
			{"list", "", "discovery.k8s.io", "endpointslices", "", true},
			{"watch", "", "", "nodes", "", true},
			{"watch", "metallb-system", "metallb.io", "ipaddresspools", "", true},
			{"list", "metallb-system", "metallb.io", "l2advertisements", "", true},
			{"create", "default", "", "events", "", true},
			{"patch", "default", "", "events", "", true},
			{"create", "metallb-system", "metallb.io", "servicel2statuses", "", true},
			{"update", "metallb-system", "metallb.io", "servicel2statuses", "status", true},
			{"delete", "metallb-system", "metallb.io", "servicel2statuses", "", true},
			{"update", "default", "", "services", "status", false},
			{"create", "metallb-system", "metallb.io", "ipaddresspools", "", false},
			{"get", "default", "", "secrets", "", false},
		} {
			d, _, _ := a.Authorize(ctx, authz.Attributes{User: u, Verb: tc.verb, ResourceRequest: true, Namespace: tc.ns,
				APIGroup: tc.group, Resource: tc.resource, Subresource: tc.sub})
			if got := d == authz.Allow; got != tc.allowed {
				t.Errorf("%s %s %s/%s %s in %q: allowed %v, want %v", u.GetName(), tc.verb, tc.group, tc.resource, tc.sub, tc.ns, got, tc.allowed)
			}
		}
	}
}
