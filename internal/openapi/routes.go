package openapi

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Model names of the meta.k8s.io and autoscaling types that operations refer
// to besides the served kinds themselves.
const (
	modelStatus          = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	modelDeleteOptions   = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	modelPatch           = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	modelAPIResourceList = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"
)

// scaleGVK is the body kind of every scale subresource.
var scaleGVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// Media types, as a kube-apiserver route advertises them.
var (
	patchTypes = []string{
		"application/json-patch+json",
		"application/merge-patch+json",
		"application/strategic-merge-patch+json",
		"application/apply-patch+yaml",
	}
	anyType       = []string{"*/*"}
	objectTypes   = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	listTypes     = append(slices.Clone(objectTypes), "application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
	discoveryType = objectTypes
)

// param is a path or query parameter.
type param struct {
	name, in, typ, description string
	required                   bool
}

func queryParam(name, typ, description string) param {
	return param{name: name, in: "query", typ: typ, description: description}
}

// The query parameters of the Kubernetes REST verbs, described in our own
// words.
var (
	pPretty                 = queryParam("pretty", "string", "If 'true', the output is pretty printed.")
	pDryRun                 = queryParam("dryRun", "string", "When present, indicates that modifications should not be persisted. The only valid value is \"All\": process the request through all stages without persisting it.")
	pFieldManager           = queryParam("fieldManager", "string", "Name of the actor making these changes, used to track field ownership. Must be at most 128 printable characters. Required for apply patches, optional otherwise.")
	pFieldValidation        = queryParam("fieldValidation", "string", "How the server handles unknown or duplicate fields in the request body: \"Ignore\" drops them silently, \"Warn\" drops them and answers with a Warning header for each, \"Strict\" fails the request with BadRequest. The default is \"Warn\".")
	pForce                  = queryParam("force", "boolean", "Force an apply request to take ownership of fields other managers own. Must be unset for patch types other than apply.")
	pGracePeriodSeconds     = queryParam("gracePeriodSeconds", "integer", "Seconds before the object should be deleted; a non-negative integer. Zero means delete immediately. Unset means the kind's default grace period.")
	pOrphanDependents       = queryParam("orphanDependents", "boolean", "Deprecated: use propagationPolicy. Whether dependent objects should be orphaned.")
	pPropagationPolicy      = queryParam("propagationPolicy", "string", "Whether and how garbage collection handles dependents: \"Orphan\", \"Background\" or \"Foreground\".")
	pIgnoreStoreReadError   = queryParam("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", "Delete an object whose stored data cannot be read or decoded. Unsafe; use only to remove corrupt objects.")
	pAllowWatchBookmarks    = queryParam("allowWatchBookmarks", "boolean", "Ask a watch for BOOKMARK events. Ignored on plain lists; servers may not send bookmarks.")
	pContinue               = queryParam("continue", "string", "The continue token returned by a previous paged list, to fetch the next page with the same query.")
	pFieldSelector          = queryParam("fieldSelector", "string", "Restrict the returned objects by their fields. Defaults to everything.")
	pLabelSelector          = queryParam("labelSelector", "string", "Restrict the returned objects by their labels. Defaults to everything.")
	pLimit                  = queryParam("limit", "integer", "Maximum number of objects to return in one page of a list; the reply's continue token fetches the rest.")
	pResourceVersion        = queryParam("resourceVersion", "string", "Constrains which resource versions the request may be served from. Defaults to the most recent.")
	pResourceVersionMatch   = queryParam("resourceVersionMatch", "string", "How resourceVersion applies to list calls: \"Exact\" or \"NotOlderThan\".")
	pSendInitialEvents      = queryParam("sendInitialEvents", "boolean", "With watch=true, start the watch with synthetic ADDED events for the current state, followed by a bookmark.")
	pTimeoutSeconds         = queryParam("timeoutSeconds", "integer", "Timeout for the list or watch call, regardless of activity.")
	pWatch                  = queryParam("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update and remove notifications.")
	listParams              = []param{pAllowWatchBookmarks, pContinue, pFieldSelector, pLabelSelector, pLimit, pResourceVersion, pResourceVersionMatch, pSendInitialEvents, pTimeoutSeconds, pWatch}
	writeParams             = []param{pDryRun, pFieldManager, pFieldValidation}
	patchParams             = []param{pDryRun, pFieldManager, pFieldValidation, pForce}
	deleteParams            = []param{pDryRun, pGracePeriodSeconds, pIgnoreStoreReadError, pOrphanDependents, pPropagationPolicy}
	deleteCollectionParams  = []param{pContinue, pDryRun, pFieldSelector, pGracePeriodSeconds, pIgnoreStoreReadError, pLabelSelector, pLimit, pOrphanDependents, pPropagationPolicy, pResourceVersion, pResourceVersionMatch, pSendInitialEvents, pTimeoutSeconds}
	namespacePathParam      = param{name: "namespace", in: "path", typ: "string", description: "object name and auth scope, such as for teams and projects", required: true}
	pathParamsCollection    = []param{pPretty}
	pathParamsNamespacedCol = []param{namespacePathParam, pPretty}
)

// response is one status-code response of an operation.
type response struct {
	code  int
	model string // schema of the body
}

// operation is a protocol-neutral description of one REST operation; it is
// rendered into both the v2 and the v3 documents.
type operation struct {
	method      string
	id          string
	description string
	action      string                  // x-kubernetes-action
	gvk         schema.GroupVersionKind // x-kubernetes-group-version-kind; zero for none
	params      []param
	body        string   // request body model; "" for none
	consumes    []string // request media types
	produces    []string // response media types
	responses   []response
}

// route is one path with its path-level parameters and operations.
type route struct {
	path   string
	params []param
	ops    []operation
}

// groupVersion collects the routes of one served group-version and the
// models they refer to.
type groupVersion struct {
	gv     schema.GroupVersion
	key    string // index key: "api/v1", "apis/apps/v1"
	routes []route
	models []string // roots for the transitive schema closure
}

func gvKey(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// opNaming computes kube-apiserver style operation IDs and tags: an ID is
// verb + group + version + [Namespaced] + kind + [subresource], for example
// patchAppsV1NamespacedDeploymentScale; the tag is "apps_v1".
type opNaming struct {
	prefix string // "CoreV1", "DiscoveryV1"
	tag    string // "core_v1", "discovery_v1"
}

func newOpNaming(gv schema.GroupVersion) opNaming {
	group := strings.TrimSuffix(gv.Group, ".k8s.io")
	if group == "" {
		group = "core"
	}
	return opNaming{
		prefix: identifier(group, true) + identifier(gv.Version, true),
		tag:    identifier(group, false) + "_" + identifier(gv.Version, false),
	}
}

// identifier drops every character that cannot appear in an identifier and
// capitalizes the letter after each dropped one ("rbac.authorization" ->
// "rbacAuthorization"), and the first letter if upper is set.
func identifier(s string, upper bool) string {
	var b strings.Builder
	capitalize := upper
	for i, r := range s {
		if !unicode.IsLetter(r) && r != '_' && (i == 0 || !unicode.IsDigit(r)) {
			capitalize = true
			continue
		}
		if capitalize {
			r = unicode.ToUpper(r)
			capitalize = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// resourceRoutes describes every path of one resource: the collection,
// the item, the all-namespaces list of a namespaced resource and the
// requested subresources.
func resourceRoutes(r Resource, names opNaming, prefix, kindModel, listModel, scaleModel string, actionModels map[string]string) []route {
	kind := r.GVK.Kind
	gvk := r.GVK
	scope := ""
	collection := prefix + "/" + r.Plural
	colParams := pathParamsCollection
	if r.Namespaced {
		scope = "Namespaced"
		collection = prefix + "/namespaces/{namespace}/" + r.Plural
		colParams = pathParamsNamespacedCol
	}
	item := collection + "/{name}"
	itemParams := func(what string) []param {
		p := []param{{name: "name", in: "path", typ: "string", description: "name of the " + what, required: true}}
		return append(p, colParams...)
	}
	id := func(verb, suffix string) string { return verb + names.prefix + scope + kind + suffix }
	create := operation{method: http.MethodPost, id: id("create", ""), description: "create a " + kind, action: "post", gvk: gvk,
		params: writeParams, body: kindModel, consumes: anyType, produces: objectTypes,
		responses: []response{{http.StatusOK, kindModel}, {http.StatusCreated, kindModel}, {http.StatusAccepted, kindModel}}}
	if r.CreateOnly {
		return []route{{path: collection, params: colParams, ops: []operation{create}}}
	}
	routes := []route{
		{path: collection, params: colParams, ops: []operation{
			{method: http.MethodGet, id: id("list", ""), description: "list or watch objects of kind " + kind, action: "list", gvk: gvk,
				params: listParams, consumes: anyType, produces: listTypes, responses: []response{{http.StatusOK, listModel}}},
			create,
			{method: http.MethodDelete, id: "delete" + names.prefix + "Collection" + scope + kind, description: "delete collection of " + kind, action: "deletecollection", gvk: gvk,
				params: deleteCollectionParams, body: modelDeleteOptions, consumes: anyType, produces: objectTypes, responses: []response{{http.StatusOK, modelStatus}}},
		}},
		{path: item, params: itemParams(kind), ops: []operation{
			{method: http.MethodGet, id: id("read", ""), description: "read the specified " + kind, action: "get", gvk: gvk,
				consumes: anyType, produces: objectTypes, responses: []response{{http.StatusOK, kindModel}}},
			{method: http.MethodPut, id: id("replace", ""), description: "replace the specified " + kind, action: "put", gvk: gvk,
				params: writeParams, body: kindModel, consumes: anyType, produces: objectTypes,
				responses: []response{{http.StatusOK, kindModel}, {http.StatusCreated, kindModel}}},
			{method: http.MethodPatch, id: id("patch", ""), description: "partially update the specified " + kind, action: "patch", gvk: gvk,
				params: patchParams, body: modelPatch, consumes: patchTypes, produces: objectTypes,
				responses: []response{{http.StatusOK, kindModel}, {http.StatusCreated, kindModel}}},
			{method: http.MethodDelete, id: id("delete", ""), description: "delete a " + kind, action: "delete", gvk: gvk,
				params: deleteParams, body: modelDeleteOptions, consumes: anyType, produces: objectTypes,
				responses: []response{{http.StatusOK, modelStatus}, {http.StatusAccepted, modelStatus}}},
		}},
	}
	if r.Namespaced {
		routes = append(routes, route{path: prefix + "/" + r.Plural, params: pathParamsCollection, ops: []operation{
			{method: http.MethodGet, id: "list" + names.prefix + kind + "ForAllNamespaces", description: "list or watch objects of kind " + kind, action: "list", gvk: gvk,
				params: listParams, consumes: anyType, produces: listTypes, responses: []response{{http.StatusOK, listModel}}},
		}})
	}
	for _, sub := range r.Subresources {
		model, subGVK := kindModel, gvk
		if sub == "scale" {
			model, subGVK = scaleModel, scaleGVK
		}
		suffix := identifier(sub, true)
		routes = append(routes, route{path: item + "/" + sub, params: itemParams(subGVK.Kind), ops: []operation{
			{method: http.MethodGet, id: id("read", suffix), description: "read " + sub + " of the specified " + kind, action: "get", gvk: subGVK,
				consumes: anyType, produces: objectTypes, responses: []response{{http.StatusOK, model}}},
			{method: http.MethodPut, id: id("replace", suffix), description: "replace " + sub + " of the specified " + kind, action: "put", gvk: subGVK,
				params: writeParams, body: model, consumes: anyType, produces: objectTypes,
				responses: []response{{http.StatusOK, model}, {http.StatusCreated, model}}},
			{method: http.MethodPatch, id: id("patch", suffix), description: "partially update " + sub + " of the specified " + kind, action: "patch", gvk: subGVK,
				params: patchParams, body: modelPatch, consumes: patchTypes, produces: objectTypes,
				responses: []response{{http.StatusOK, model}, {http.StatusCreated, model}}},
		}})
	}
	for _, sub := range slices.Sorted(maps.Keys(r.Actions)) {
		model := actionModels[sub]
		routes = append(routes, route{path: item + "/" + sub, params: itemParams(r.Actions[sub].Kind), ops: []operation{
			{method: http.MethodPost, id: id("create", identifier(sub, true)), description: "create " + r.Actions[sub].Kind + " of a " + kind, action: "post", gvk: r.Actions[sub],
				params: writeParams, body: model, consumes: anyType, produces: objectTypes,
				responses: []response{{http.StatusOK, model}, {http.StatusCreated, model}, {http.StatusAccepted, model}}},
		}})
	}
	return routes
}

// discoveryRoute is the group-version's resource list, as upstream
// publishes it in every group-version document.
func discoveryRoute(names opNaming, prefix string) route {
	return route{path: prefix + "/", ops: []operation{{
		method: http.MethodGet, id: "get" + names.prefix + "APIResources", description: "get available resources",
		consumes: discoveryType, produces: discoveryType, responses: []response{{http.StatusOK, modelAPIResourceList}},
	}}}
}

// buildGroupVersions validates the served resources and groups their
// routes by group-version, in a stable order.
func buildGroupVersions(resources []Resource, idx *kindIndex) ([]*groupVersion, error) {
	scaleModel, err := idx.model(scaleGVK)
	if err != nil {
		return nil, fmt.Errorf("scale subresource: %w", err)
	}
	byGV := map[schema.GroupVersion]*groupVersion{}
	seen := map[schema.GroupVersionResource]bool{}
	for _, r := range resources {
		gv := r.GVK.GroupVersion()
		gvr := gv.WithResource(r.Plural)
		switch {
		case r.GVK.Kind == "" || r.GVK.Version == "":
			return nil, fmt.Errorf("resource %q: GVK %s needs a version and a kind", r.Plural, r.GVK)
		case r.Plural == "" || strings.Contains(r.Plural, "/"):
			return nil, fmt.Errorf("resource %s: invalid plural %q", r.GVK, r.Plural)
		case seen[gvr]:
			return nil, fmt.Errorf("resource %s listed twice", gvr)
		}
		seen[gvr] = true
		kindModel, err := idx.model(r.GVK)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", gvr, err)
		}
		listModel := ""
		if !r.CreateOnly {
			listModel, err = idx.model(gv.WithKind(r.GVK.Kind + "List"))
			if err != nil {
				return nil, fmt.Errorf("resource %s: list kind: %w", gvr, err)
			}
		}
		actionModels := map[string]string{}
		for sub, k := range r.Actions {
			if actionModels[sub], err = idx.model(k); err != nil {
				return nil, fmt.Errorf("resource %s/%s: %w", gvr, sub, err)
			}
		}
		scale := false
		for _, sub := range r.Subresources {
			switch {
			case sub == "scale":
				scale = true
			case sub == "" || strings.Contains(sub, "/"):
				return nil, fmt.Errorf("resource %s: invalid subresource %q", gvr, sub)
			}
		}

		g, ok := byGV[gv]
		names := newOpNaming(gv)
		prefix := "/" + gvKey(gv)
		if !ok {
			g = &groupVersion{gv: gv, key: gvKey(gv), models: []string{modelStatus, modelDeleteOptions, modelPatch, modelAPIResourceList}}
			g.routes = append(g.routes, discoveryRoute(names, prefix))
			byGV[gv] = g
		}
		g.routes = append(g.routes, resourceRoutes(r, names, prefix, kindModel, listModel, scaleModel, actionModels)...)
		g.models = append(g.models, kindModel)
		if listModel != "" {
			g.models = append(g.models, listModel)
		}
		for _, m := range actionModels {
			g.models = append(g.models, m)
		}
		if scale {
			g.models = append(g.models, scaleModel)
		}
	}
	out := make([]*groupVersion, 0, len(byGV))
	for _, g := range byGV {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *groupVersion) int { return strings.Compare(a.key, b.key) })
	return out, nil
}
