package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/svcnet/svcnet/internal/auth/authz"
)

// impersonate is upstream's impersonation filter: a request with
// Impersonate-User (and optionally Impersonate-Group, -Uid and
// -Extra-<key>) acts as that user once the requester is allowed the verb
// "impersonate" on each (users, serviceaccounts, groups, uids, userextras);
// the headers are dropped. It returns the user the request acts as.
func (s *Server) impersonate(r *http.Request, requester user.Info) (user.Info, error) {
	h := r.Header
	if !impersonating(h) {
		return requester, nil
	}
	name := h.Get(authenticationv1.ImpersonateUserHeader)
	groups, uid := h.Values(authenticationv1.ImpersonateGroupHeader), h.Get(authenticationv1.ImpersonateUIDHeader)
	extra := map[string][]string{}
	for k, vs := range h {
		if rest, ok := strings.CutPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix); ok {
			key, err := url.PathUnescape(strings.ToLower(rest))
			if err != nil {
				key = strings.ToLower(rest)
			}
			extra[key] = append(extra[key], vs...)
		}
	}
	if name == "" {
		if len(groups) > 0 || len(extra) > 0 || uid != "" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("requested impersonation of groups %q, extra %v, uid %q without impersonating a user", groups, extra, uid))
		}
		return requester, nil
	}
	asked := []authz.Attributes{{Resource: "users", Name: name}}
	impersonated := &user.DefaultInfo{Name: name, UID: uid, Groups: slices.Clone(groups), Extra: extra}
	if ns, sa, err := serviceaccount.SplitUsername(name); err == nil {
		asked[0] = authz.Attributes{Resource: "serviceaccounts", Namespace: ns, Name: sa}
		if len(groups) == 0 {
			impersonated.Groups = serviceaccount.MakeGroupNames(ns)
		}
	}
	for _, g := range groups {
		asked = append(asked, authz.Attributes{Resource: "groups", Name: g})
	}
	for k, vs := range extra {
		for _, v := range vs {
			asked = append(asked, authz.Attributes{APIGroup: authenticationv1.GroupName, APIVersion: "v1", Resource: "userextras", Subresource: k, Name: v})
		}
	}
	if uid != "" {
		asked = append(asked, authz.Attributes{APIGroup: authenticationv1.GroupName, APIVersion: "v1", Resource: "uids", Name: uid})
	}
	for _, a := range asked {
		if s.authz == nil {
			break
		}
		a.User, a.Verb, a.ResourceRequest = requester, "impersonate", true
		d, reason, _ := s.authz.Authorize(r.Context(), a)
		if d != authz.Allow {
			return nil, authz.Forbidden(a, reason)
		}
	}
	everyone := user.AllAuthenticated
	if name == user.Anonymous {
		everyone = user.AllUnauthenticated
	}
	if !slices.Contains(impersonated.Groups, everyone) && (name == user.Anonymous || !slices.Contains(impersonated.Groups, user.AllUnauthenticated)) {
		impersonated.Groups = append(impersonated.Groups, everyone)
	}
	h.Del(authenticationv1.ImpersonateUserHeader)
	h.Del(authenticationv1.ImpersonateGroupHeader)
	h.Del(authenticationv1.ImpersonateUIDHeader)
	for k := range h {
		if strings.HasPrefix(k, authenticationv1.ImpersonateUserExtraHeaderPrefix) {
			h.Del(k)
		}
	}
	return impersonated, nil
}

// impersonating reports whether a request has any Impersonate- header.
func impersonating(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, "Impersonate-") {
			return true
		}
	}
	return false
}
