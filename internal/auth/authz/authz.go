// Package authz decides whether an authenticated user may make a request,
// as kube-apiserver's authorization chain does: the request's attributes
// (verb, API group, resource, subresource, namespace, name, or the path of
// a non-resource request) read off the URL as upstream's RequestInfo
// does, so that a path the server does not serve is still authorized
// before it is found missing; authorizers asked in turn until one allows
// or denies; members of system:masters allowed everything; and the 403
// Status in upstream's words.
package authz

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Decision is an authorizer's answer.
type Decision int

// The answers, as upstream's: NoOpinion passes the request to the next
// authorizer, and a request none allows is refused.
const (
	NoOpinion Decision = iota
	Allow
	Deny
)

// Attributes are what a request asks to do.
type Attributes struct {
	User            user.Info
	Verb            string
	ResourceRequest bool
	// Of a resource request.
	Namespace, APIGroup, APIVersion, Resource, Subresource, Name string
	// FieldSelector is a list's or watch's field selector, if it has a
	// valid one (the Node authorizer lets a node list its own pods).
	FieldSelector fields.Selector
	// Of a non-resource request.
	Path string
}

// Authorizer decides on requests; reason explains a decision (RBAC names
// the roles it could not find).
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// Union asks each authorizer in turn, as upstream's union authorizer: the
// first Allow or Deny decides; reasons of those with no opinion are
// joined.
type Union []Authorizer

// Authorize implements Authorizer.
func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, z := range u {
		d, reason, err := z.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if d != NoOpinion {
			return d, reason, err
		}
	}
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("%v", errs)
	}
	return NoOpinion, strings.Join(reasons, "\n"), err
}

// PrivilegedGroups allows everything to members of the groups
// (system:masters), before any policy is read.
type PrivilegedGroups []string

// Authorize implements Authorizer.
func (p PrivilegedGroups) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User != nil && slices.ContainsFunc(a.User.GetGroups(), func(g string) bool { return slices.Contains(p, g) }) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
}

// AlwaysAllow allows every request (--authorization-mode=AlwaysAllow).
type AlwaysAllow struct{}

// Authorize implements Authorizer.
func (AlwaysAllow) Authorize(context.Context, Attributes) (Decision, string, error) {
	return Allow, "", nil
}

// Forbidden is upstream's 403 for a refused request: "<resource> "<name>"
// is forbidden: User "<user>" cannot <verb> resource "<resource>" in API
// group "<group>" in the namespace "<ns>"", with ": <reason>" when the
// authorizers gave one.
func Forbidden(a Attributes, reason string) *apierrors.StatusError {
	name := ""
	if a.User != nil {
		name = a.User.GetName()
	}
	var msg string
	switch {
	case !a.ResourceRequest:
		msg = fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	case a.Namespace != "":
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, a.resourcePath(), a.APIGroup, a.Namespace)
	default:
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, a.resourcePath(), a.APIGroup)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, fmt.Errorf("%s", msg))
}

func (a Attributes) resourcePath() string {
	if a.Subresource != "" {
		return a.Resource + "/" + a.Subresource
	}
	return a.Resource
}

// RequestAttributes reads a request's attributes off its URL, as
// upstream's RequestInfoFactory: /api/v1/... and /apis/<group>/<v>/...
// are resource requests (the /watch/ and /proxy/ path prefixes set the
// verb); a GET of a collection is list, or watch with ?watch; a DELETE of
// one is deletecollection; a list selecting metadata.name by field names
// that object. Any other path is a non-resource request whose verb is the
// method in lower case.
func RequestAttributes(r *http.Request, u user.Info) Attributes {
	a := Attributes{User: u, Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return a
	}
	prefix := parts[0]
	parts = parts[1:]
	if prefix == "apis" {
		if len(parts) < 3 {
			return a
		}
		a.APIGroup, parts = parts[0], parts[1:]
	}
	a.ResourceRequest = true
	a.APIVersion, parts = parts[0], parts[1:]
	if parts[0] == "watch" || parts[0] == "proxy" {
		if len(parts) < 2 {
			return a
		}
		a.Verb, parts = parts[0], parts[1:]
	} else {
		a.Verb = methodVerbs[r.Method]
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		a.Namespace = parts[1]
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	if len(parts) >= 3 && a.Verb != "proxy" {
		a.Subresource = parts[2]
	}
	if len(parts) >= 2 {
		a.Name = parts[1]
	}
	a.Resource = parts[0]
	q := r.URL.Query()
	if a.Name == "" && a.Verb == "get" {
		a.Verb = "list"
		if w, ok := q["watch"]; ok && len(w) > 0 && w[0] != "0" && !strings.EqualFold(w[0], "false") {
			a.Verb = "watch"
		}
		if fs := q.Get("fieldSelector"); fs != "" {
			if sel, err := fields.ParseSelector(fs); err == nil {
				a.FieldSelector = sel
				if name, ok := sel.RequiresExactMatch("metadata.name"); ok && !strings.ContainsAny(name, "/%") && name != "." && name != ".." {
					a.Name = name
				}
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	return a
}

var methodVerbs = map[string]string{
	http.MethodPost: "create", http.MethodGet: "get", http.MethodHead: "get",
	http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// FromReview is what an access review (SubjectAccessReview and its self
// and local kinds) asks about u: its resource attributes ("*" for an
// empty version, as upstream), else its non-resource ones.
func FromReview(u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) Attributes {
	if ra == nil {
		a := Attributes{User: u}
		if nra != nil {
			a.Verb, a.Path = nra.Verb, nra.Path
		}
		return a
	}
	version := ra.Version
	if version == "" {
		version = "*"
	}
	return Attributes{User: u, Verb: ra.Verb, ResourceRequest: true, Namespace: ra.Namespace, APIGroup: ra.Group,
		APIVersion: version, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name}
}
