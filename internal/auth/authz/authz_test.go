package authz

import (
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestRequestAttributes(t *testing.T) {
	for _, c := range []struct {
		method, url string
		want        Attributes
		selector    string
	}{
		{"GET", "/api/v1/namespaces/ns/pods", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "pods"}, ""},
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "pods"}, ""},
		{"GET", "/api/v1/watch/namespaces/ns/pods", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "pods"}, ""},
		{"GET", "/api/v1/namespaces/ns/pods/web/log", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "web", Subresource: "log"}, ""},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dweb", Attributes{Verb: "list", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "web"}, "metadata.name=web"},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&watch=1", Attributes{Verb: "watch", ResourceRequest: true, APIVersion: "v1", Resource: "pods"}, "spec.nodeName=n1"},
		{"DELETE", "/apis/apps/v1/namespaces/ns/deployments", Attributes{Verb: "deletecollection", ResourceRequest: true, APIGroup: "apps", APIVersion: "v1", Namespace: "ns", Resource: "deployments"}, ""},
		{"PUT", "/api/v1/namespaces/ns/finalize", Attributes{Verb: "update", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns", Subresource: "finalize"}, ""},
		{"GET", "/api/v1/namespaces/ns", Attributes{Verb: "get", ResourceRequest: true, APIVersion: "v1", Namespace: "ns", Resource: "namespaces", Name: "ns"}, ""},
		{"POST", "/apis/example.com/v1/widgets", Attributes{Verb: "create", ResourceRequest: true, APIGroup: "example.com", APIVersion: "v1", Resource: "widgets"}, ""},
		{"GET", "/apis/apps", Attributes{Verb: "get", Path: "/apis/apps"}, ""},
		{"GET", "/healthz", Attributes{Verb: "get", Path: "/healthz"}, ""},
	} {
		got := RequestAttributes(httptest.NewRequest(c.method, c.url, nil), nil)
		if !c.want.ResourceRequest {
			got.Path = c.want.Path
		}
		c.want.Path = got.Path
		selector := ""
		if got.FieldSelector != nil {
			selector, got.FieldSelector = got.FieldSelector.String(), nil
		}
		if got != c.want || selector != c.selector {
			t.Errorf("%s %s:\n got %+v (selector %q)\nwant %+v (selector %q)", c.method, c.url, got, selector, c.want, c.selector)
		}
	}
}

func TestForbiddenMessages(t *testing.T) {
	jane := &user.DefaultInfo{Name: "jane"}
	for _, c := range []struct {
		a      Attributes
		reason string
		want   string
	}{
		{Attributes{User: jane, Verb: "get", ResourceRequest: true, Namespace: "ns", Resource: "secrets", Name: "db"}, "",
			`secrets "db" is forbidden: User "jane" cannot get resource "secrets" in API group "" in the namespace "ns"`},
		{Attributes{User: jane, Verb: "list", ResourceRequest: true, APIGroup: "apps", Resource: "deployments"}, `RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`,
			`deployments.apps is forbidden: User "jane" cannot list resource "deployments" in API group "apps" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`},
		{Attributes{User: jane, Verb: "create", ResourceRequest: true, Namespace: "ns", Resource: "pods", Name: "p", Subresource: "exec"}, "",
			`pods "p" is forbidden: User "jane" cannot create resource "pods/exec" in API group "" in the namespace "ns"`},
		{Attributes{User: jane, Verb: "get", Path: "/metrics"}, "", `forbidden: User "jane" cannot get path "/metrics"`},
	} {
		err := Forbidden(c.a, c.reason)
		if err.ErrStatus.Code != 403 || err.ErrStatus.Reason != "Forbidden" || err.Error() != c.want {
			t.Errorf("got %d %s %q\nwant %q", err.ErrStatus.Code, err.ErrStatus.Reason, err.Error(), c.want)
		}
	}
}
