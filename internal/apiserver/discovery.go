package apiserver

import (
	"encoding/json"
	"maps"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/svcnet/svcnet/internal/registry"
)

// aggregatedType is the response media type that makes clients read
// /api and /apis as aggregated discovery (apidiscovery.k8s.io/v2).
const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

var allVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// discoveryCache holds the discovery documents of the resource set's
// current generation, computed again when the set changes (a custom
// resource definition comes or goes).
type discoveryCache struct {
	mu  sync.Mutex
	gen uint64
	d   *discovery
}

func (c *discoveryCache) get(set *registry.Set) *discovery {
	gen := set.Generation()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.d == nil || c.gen != gen {
		c.d, c.gen = newDiscovery(set), gen
	}
	return c.d
}

// discovery answers /api, /apis and the per-group-version resource lists
// of one generation of the resource set.
type discovery struct {
	core       apidiscoveryv2.APIGroupDiscoveryList
	groups     apidiscoveryv2.APIGroupDiscoveryList
	versions   metav1.APIVersions
	groupList  metav1.APIGroupList
	byGroup    map[string]metav1.APIGroup
	byGV       map[string]metav1.APIResourceList // "v1", "apps/v1"
	pathsCache []string
}

type subresource struct {
	name  string
	kind  schema.GroupVersionKind // empty group/version: the parent's
	verbs []string
}

func subresourcesOf(r *registry.Resource) []subresource {
	var out []subresource
	if r.Resource == "pods" && r.Kind.Group == "" {
		out = append(out,
			subresource{name: "binding", kind: schema.GroupVersionKind{Kind: "Binding"}, verbs: []string{"create"}},
			subresource{name: "log", kind: schema.GroupVersionKind{Kind: "Pod"}, verbs: []string{"get"}},
			subresource{name: "attach", kind: schema.GroupVersionKind{Kind: "PodAttachOptions"}, verbs: []string{"create", "get"}},
			subresource{name: "exec", kind: schema.GroupVersionKind{Kind: "PodExecOptions"}, verbs: []string{"create", "get"}},
			subresource{name: "portforward", kind: schema.GroupVersionKind{Kind: "PodPortForwardOptions"}, verbs: []string{"create", "get"}})
	}
	if proxyKind, ok := map[string]string{"pods": "PodProxyOptions", "services": "ServiceProxyOptions", "nodes": "NodeProxyOptions"}[r.Resource]; ok && r.Kind.Group == "" {
		out = append(out, subresource{name: proxySubresource, kind: schema.GroupVersionKind{Kind: proxyKind}, verbs: []string{"create", "delete", "get", "patch", "update"}})
	}
	if r.Resource == "namespaces" {
		out = append(out, subresource{name: "finalize", kind: schema.GroupVersionKind{Kind: r.Kind.Kind}, verbs: []string{"update"}})
	}
	if r.Scale != nil {
		out = append(out, subresource{name: "scale", kind: schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, verbs: []string{"get", "patch", "update"}})
	}
	for _, name := range slices.Sorted(maps.Keys(r.Actions)) {
		a := r.Actions[name]
		out = append(out, subresource{name: name, kind: a.Kind, verbs: []string{"create"}})
	}
	for _, name := range slices.Sorted(maps.Keys(r.Subresources)) {
		out = append(out, subresource{name: name, kind: schema.GroupVersionKind{Kind: r.Kind.Kind}, verbs: []string{"get", "patch", "update"}})
	}
	if r.Status {
		out = append(out, subresource{name: "status", kind: schema.GroupVersionKind{Kind: r.Kind.Kind}, verbs: []string{"get", "patch", "update"}})
	}
	return out
}

func newDiscovery(set *registry.Set) *discovery {
	d := &discovery{
		byGroup: map[string]metav1.APIGroup{},
		byGV:    map[string]metav1.APIResourceList{},
	}
	d.core.Kind, d.core.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
	d.groups.Kind, d.groups.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
	d.versions = metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ""}}}
	d.groupList = metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}

	for _, gv := range set.GroupVersions() {
		var resources []apidiscoveryv2.APIResourceDiscovery
		list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
		for _, r := range set.All() {
			if r.Kind.GroupVersion() != gv {
				continue
			}
			verbs := allVerbs
			if r.Create != nil {
				verbs = []string{"create"}
			}
			if r.View != nil {
				verbs = viewVerbs
			}
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			rd := apidiscoveryv2.APIResourceDiscovery{
				Resource:         r.Resource,
				ResponseKind:     &metav1.GroupVersionKind{Kind: r.Kind.Kind},
				Scope:            scope,
				SingularResource: r.Singular,
				Verbs:            verbs,
				ShortNames:       r.ShortNames,
				Categories:       r.Categories,
			}
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: r.Resource, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind.Kind,
				Verbs: verbs, ShortNames: r.ShortNames, Categories: r.Categories,
			})
			for _, sub := range subresourcesOf(r) {
				rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  sub.name,
					ResponseKind: &metav1.GroupVersionKind{Group: sub.kind.Group, Version: sub.kind.Version, Kind: sub.kind.Kind},
					Verbs:        sub.verbs,
				})
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name: r.Resource + "/" + sub.name, Namespaced: r.Namespaced, Group: sub.kind.Group,
					Version: sub.kind.Version, Kind: sub.kind.Kind, Verbs: sub.verbs,
				})
			}
			resources = append(resources, rd)
		}
		d.byGV[gv.String()] = list
		vd := apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: resources, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		if gv.Group == "" {
			d.core.Items = append(d.core.Items, apidiscoveryv2.APIGroupDiscovery{Versions: []apidiscoveryv2.APIVersionDiscovery{vd}})
			continue
		}
		if n := len(d.groups.Items); n == 0 || d.groups.Items[n-1].Name != gv.Group {
			d.groups.Items = append(d.groups.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: gv.Group}})
		}
		g := &d.groups.Items[len(d.groups.Items)-1]
		g.Versions = append(g.Versions, vd)
	}
	// A group's versions go in preference order (v2, v1, v1beta1, ...),
	// the first preferred, as upstream orders custom resource versions.
	for i := range d.groups.Items {
		g := &d.groups.Items[i]
		sort.SliceStable(g.Versions, func(a, b int) bool {
			return version.CompareKubeAwareVersionStrings(g.Versions[a].Version, g.Versions[b].Version) > 0
		})
		group := legacyGroup(*g)
		d.byGroup[g.Name] = group
		d.groupList.Groups = append(d.groupList.Groups, group)
	}
	d.pathsCache = []string{"/.well-known/openid-configuration", "/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/openapi/v2", "/openapi/v3", "/openid/v1/jwks", "/readyz", "/version"}
	for gv := range d.byGV {
		if gv != "v1" {
			d.pathsCache = append(d.pathsCache, "/apis/"+gv, "/apis/"+strings.Split(gv, "/")[0])
		}
	}
	sort.Strings(d.pathsCache)
	return d
}

func (d *discovery) paths() []string { return d.pathsCache }

// withPath is the sorted paths with p added in its place (a copy).
func withPath(paths []string, p string) []string {
	i, found := slices.BinarySearch(paths, p)
	if found {
		return paths
	}
	return slices.Insert(slices.Clone(paths), i, p)
}

// claims reports whether path lies under /api or under a served API
// group, where kube-apiserver's go-restful web services (the legacy root
// and each group's) own every path, known or not.
func (d *discovery) claims(path string) bool {
	if path == "/api" || strings.HasPrefix(path, "/api/") {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return false
	}
	group, _, _ := strings.Cut(rest, "/")
	_, served := d.byGroup[group]
	return served
}

// wantsAggregated reports whether Accept asks for aggregated discovery v2.
func wantsAggregated(r *http.Request) bool {
	for _, entry := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil {
			continue
		}
		if mt == "application/json" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList" {
			return true
		}
		if mt == "application/json" && params["as"] == "" {
			return false // plain JSON preferred
		}
	}
	return false
}

// serve answers discovery paths, with the groups of aggregated
// APIServices (extra) beside the served ones; it reports false for other
// paths.
func (d *discovery) serve(w http.ResponseWriter, r *http.Request, extra []apidiscoveryv2.APIGroupDiscovery) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/api":
		if wantsAggregated(r) {
			writeAggregated(w, d.core)
		} else {
			writeJSONValue(w, http.StatusOK, d.versions)
		}
	case p == "/apis":
		if wantsAggregated(r) {
			groups := d.groups
			groups.Items = mergeGroups(d.groups.Items, extra)
			writeAggregated(w, groups)
		} else {
			list := d.groupList
			if len(extra) > 0 {
				list.Groups = nil
				for _, g := range mergeGroups(d.groups.Items, extra) {
					list.Groups = append(list.Groups, legacyGroup(g))
				}
			}
			writeJSONValue(w, http.StatusOK, list)
		}
	case p == "/api/v1":
		writeJSONValue(w, http.StatusOK, d.byGV["v1"])
	case strings.HasPrefix(p, "/apis/"):
		rest := strings.TrimPrefix(p, "/apis/")
		switch strings.Count(rest, "/") {
		case 0:
			i := slices.IndexFunc(extra, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == rest })
			g, ok := d.byGroup[rest]
			switch {
			case i >= 0:
				merged := mergeGroups(d.groups.Items, extra)
				j := slices.IndexFunc(merged, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == rest })
				g = legacyGroup(merged[j])
			case !ok:
				return false
			}
			writeJSONValue(w, http.StatusOK, g)
		case 1:
			l, ok := d.byGV[rest]
			if !ok {
				return false
			}
			writeJSONValue(w, http.StatusOK, l)
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// mergeGroups lays the aggregated groups over the served ones: a version
// both have is the aggregated one's (its APIService proxies it), other
// aggregated versions follow the group's own, and new groups follow the
// served ones.
func mergeGroups(served, extra []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	if len(extra) == 0 {
		return served
	}
	out := slices.Clone(served)
	for _, e := range extra {
		i := slices.IndexFunc(out, func(g apidiscoveryv2.APIGroupDiscovery) bool { return g.Name == e.Name })
		if i < 0 {
			out = append(out, e)
			continue
		}
		g := out[i]
		g.Versions = slices.Clone(g.Versions)
		for _, v := range e.Versions {
			if j := slices.IndexFunc(g.Versions, func(x apidiscoveryv2.APIVersionDiscovery) bool { return x.Version == v.Version }); j >= 0 {
				g.Versions[j] = v
			} else {
				g.Versions = append(g.Versions, v)
			}
		}
		out[i] = g
	}
	return out
}

// legacyGroup is the APIGroup of a group's discovery, its first version
// preferred.
func legacyGroup(g apidiscoveryv2.APIGroupDiscovery) metav1.APIGroup {
	group := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.Name}
	for _, v := range g.Versions {
		group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.Name + "/" + v.Version, Version: v.Version})
	}
	if len(group.Versions) > 0 {
		group.PreferredVersion = group.Versions[0]
	}
	return group
}

func writeAggregated(w http.ResponseWriter, v apidiscoveryv2.APIGroupDiscoveryList) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", aggregatedType)
	w.Header().Set("Vary", "Accept")
	_, _ = w.Write(body)
}

// writeJSONValue writes any JSON-marshalable value.
func writeJSONValue(w http.ResponseWriter, code int, v interface{}) {
	writeJSONBody(w, code, v, json.Marshal)
}

// writeRawJSON writes a value that is no API object, indented, as
// upstream's WriteRawJSON writes /version and the root's paths.
func writeRawJSON(w http.ResponseWriter, code int, v interface{}) {
	writeJSONBody(w, code, v, func(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") })
}

func writeJSONBody(w http.ResponseWriter, code int, v interface{}, marshal func(any) ([]byte, error)) {
	body, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
