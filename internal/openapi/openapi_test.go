package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
)

func gvk(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

// sampleResources is a realistic served set of about twenty resources.
var sampleResources = []Resource{
	{GVK: gvk("", "v1", "Pod"), Plural: "pods", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("", "v1", "Service"), Plural: "services", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("", "v1", "ConfigMap"), Plural: "configmaps", Namespaced: true},
	{GVK: gvk("", "v1", "Secret"), Plural: "secrets", Namespaced: true},
	{GVK: gvk("", "v1", "Namespace"), Plural: "namespaces", Subresources: []string{"status"}},
	{GVK: gvk("", "v1", "Node"), Plural: "nodes", Subresources: []string{"status"}},
	{GVK: gvk("", "v1", "Endpoints"), Plural: "endpoints", Namespaced: true},
	{GVK: gvk("", "v1", "Event"), Plural: "events", Namespaced: true},
	{GVK: gvk("", "v1", "ServiceAccount"), Plural: "serviceaccounts", Namespaced: true},
	{GVK: gvk("", "v1", "PersistentVolumeClaim"), Plural: "persistentvolumeclaims", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("", "v1", "ReplicationController"), Plural: "replicationcontrollers", Namespaced: true, Subresources: []string{"status", "scale"}},
	{GVK: gvk("apps", "v1", "Deployment"), Plural: "deployments", Namespaced: true, Subresources: []string{"status", "scale"}},
	{GVK: gvk("apps", "v1", "ReplicaSet"), Plural: "replicasets", Namespaced: true, Subresources: []string{"status", "scale"}},
	{GVK: gvk("apps", "v1", "StatefulSet"), Plural: "statefulsets", Namespaced: true, Subresources: []string{"status", "scale"}},
	{GVK: gvk("apps", "v1", "DaemonSet"), Plural: "daemonsets", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("discovery.k8s.io", "v1", "EndpointSlice"), Plural: "endpointslices", Namespaced: true},
	{GVK: gvk("networking.k8s.io", "v1", "Ingress"), Plural: "ingresses", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("networking.k8s.io", "v1", "NetworkPolicy"), Plural: "networkpolicies", Namespaced: true},
	{GVK: gvk("storage.k8s.io", "v1", "StorageClass"), Plural: "storageclasses"},
	{GVK: gvk("coordination.k8s.io", "v1", "Lease"), Plural: "leases", Namespaced: true},
	{GVK: gvk("autoscaling", "v1", "HorizontalPodAutoscaler"), Plural: "horizontalpodautoscalers", Namespaced: true, Subresources: []string{"status"}},
	{GVK: gvk("policy", "v1", "PodDisruptionBudget"), Plural: "poddisruptionbudgets", Namespaced: true, Subresources: []string{"status"}},
}

var (
	sampleOnce sync.Once
	sample     *Service
	sampleErr  error
)

func sampleService(t *testing.T) *Service {
	t.Helper()
	sampleOnce.Do(func() { sample, sampleErr = New(sampleResources) })
	if sampleErr != nil {
		t.Fatalf("New: %v", sampleErr)
	}
	return sample
}

func get(t *testing.T, h http.Handler, url, accept string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return b
}

// index fetches /openapi/v3 the way kubectl does.
func index(t *testing.T, s *Service) map[string]string {
	t.Helper()
	resp := get(t, s, "/openapi/v3?timeout=32s", "application/json, */*")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v3: status %d", resp.StatusCode)
	}
	var idx struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(readBody(t, resp), &idx); err != nil {
		t.Fatalf("decoding index: %v", err)
	}
	out := map[string]string{}
	for k, v := range idx.Paths {
		out[k] = v.ServerRelativeURL
	}
	return out
}

// v3Doc fetches one group-version document through the index, as JSON
// objects for structural checks.
func v3Doc(t *testing.T, s *Service, key string) (map[string]any, []byte) {
	t.Helper()
	u, ok := index(t, s)[key]
	if !ok {
		t.Fatalf("index has no %q", key)
	}
	resp := get(t, s, u+"&timeout=32s", "application/json")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", u, resp.StatusCode)
	}
	if got := resp.Header.Get("Cache-Control"); got != "public, immutable" {
		t.Errorf("GET %s: Cache-Control = %q, want public, immutable", u, got)
	}
	if resp.Header.Get("Etag") == "" {
		t.Errorf("GET %s: no ETag", u)
	}
	raw := readBody(t, resp)
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decoding %s: %v", key, err)
	}
	return doc, raw
}

// dig walks nested JSON objects.
func dig(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object", strings.Join(keys[:i], "."))
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("missing %s", strings.Join(keys[:i+1], "."))
		}
	}
	return v
}

func TestV3Index(t *testing.T) {
	s := sampleService(t)
	idx := index(t, s)
	for _, want := range []string{
		"api/v1", "apis/apps/v1", "apis/discovery.k8s.io/v1", "apis/networking.k8s.io/v1",
		"apis/storage.k8s.io/v1", "apis/coordination.k8s.io/v1", "apis/autoscaling/v1", "apis/policy/v1",
	} {
		u, ok := idx[want]
		if !ok {
			t.Errorf("index lacks %s; has %v", want, idx)
			continue
		}
		if !strings.HasPrefix(u, "/openapi/v3/"+want+"?hash=") {
			t.Errorf("%s: serverRelativeURL = %q", want, u)
		}
	}
	if len(idx) != 8 {
		t.Errorf("index has %d entries, want 8: %v", len(idx), idx)
	}
}

func TestV3ServicePatch(t *testing.T) {
	doc, _ := v3Doc(t, sampleService(t), "api/v1")
	if v := dig(t, doc, "openapi"); v != "3.0.0" {
		t.Errorf("openapi = %v", v)
	}
	patch := dig(t, doc, "paths", "/api/v1/namespaces/{namespace}/services/{name}", "patch").(map[string]any)
	wantGVK := map[string]any{"group": "", "version": "v1", "kind": "Service"}
	if got := dig(t, patch, extensionGVK); !equalJSON(got, wantGVK) {
		t.Errorf("%s = %v, want %v", extensionGVK, got, wantGVK)
	}
	found := false
	for _, p := range dig(t, patch, "parameters").([]any) {
		p := p.(map[string]any)
		if p["name"] == "fieldValidation" && p["in"] == "query" {
			found = true
		}
	}
	if !found {
		t.Error("PATCH services has no fieldValidation query parameter")
	}
	content := dig(t, patch, "requestBody", "content").(map[string]any)
	for _, ct := range patchTypes {
		if _, ok := content[ct]; !ok {
			t.Errorf("PATCH services requestBody lacks %s", ct)
		}
	}
	if ref := dig(t, content, "application/strategic-merge-patch+json", "schema", "$ref"); ref != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch" {
		t.Errorf("patch body $ref = %v", ref)
	}
	// The status subresource is patchable with the same kind.
	statusGVK := dig(t, doc, "paths", "/api/v1/namespaces/{namespace}/services/{name}/status", "patch", extensionGVK)
	if !equalJSON(statusGVK, wantGVK) {
		t.Errorf("services/status patch GVK = %v", statusGVK)
	}
	// Cluster-scoped resources have no namespace segment.
	dig(t, doc, "paths", "/api/v1/nodes/{name}", "patch")
	dig(t, doc, "paths", "/api/v1/services", "get")
}

func TestV3ServiceSpecSchema(t *testing.T) {
	doc, _ := v3Doc(t, sampleService(t), "api/v1")
	schemas := dig(t, doc, "components", "schemas")
	ports := dig(t, schemas, "io.k8s.api.core.v1.ServiceSpec", "properties", "ports")
	if v := dig(t, ports, "x-kubernetes-patch-merge-key"); v != "port" {
		t.Errorf("ports x-kubernetes-patch-merge-key = %v", v)
	}
	if v := dig(t, ports, "x-kubernetes-patch-strategy"); v != "merge" {
		t.Errorf("ports x-kubernetes-patch-strategy = %v", v)
	}
	if v := dig(t, ports, "x-kubernetes-list-type"); v != "map" {
		t.Errorf("ports x-kubernetes-list-type = %v", v)
	}
	gvks := dig(t, schemas, "io.k8s.api.core.v1.Service", extensionGVK)
	if want := []any{map[string]any{"group": "", "version": "v1", "kind": "Service"}}; !equalJSON(gvks, want) {
		t.Errorf("Service %s = %v, want %v", extensionGVK, gvks, want)
	}
	// Shared meta types carry one GVK per group-version they are registered in.
	if n := len(dig(t, schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", extensionGVK).([]any)); n < 8 {
		t.Errorf("DeleteOptions has %d GVKs, want one per group-version", n)
	}
	// Description text for kubectl explain.
	if d, _ := dig(t, schemas, "io.k8s.api.core.v1.ServiceSpec", "description").(string); !strings.Contains(d, "attributes") {
		t.Errorf("ServiceSpec description = %q", d)
	}
}

func TestV3Scale(t *testing.T) {
	doc, _ := v3Doc(t, sampleService(t), "apis/apps/v1")
	patch := dig(t, doc, "paths", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "patch")
	want := map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}
	if got := dig(t, patch, extensionGVK); !equalJSON(got, want) {
		t.Errorf("deployments/scale GVK = %v, want %v", got, want)
	}
	ref := dig(t, patch, "responses", "200", "content", "application/json", "schema", "$ref")
	if ref != "#/components/schemas/io.k8s.api.autoscaling.v1.Scale" {
		t.Errorf("scale response $ref = %v", ref)
	}
	dig(t, doc, "components", "schemas", "io.k8s.api.autoscaling.v1.Scale")
	if got := dig(t, doc, "paths", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}", "patch", "operationId"); got != "patchAppsV1NamespacedDeployment" {
		t.Errorf("operationId = %v", got)
	}
}

// TestV3RefsResolve checks that every group-version document is
// self-contained: each $ref names a schema of its own components.
func TestV3RefsResolve(t *testing.T) {
	s := sampleService(t)
	for key := range index(t, s) {
		doc, _ := v3Doc(t, s, key)
		schemas := dig(t, doc, "components", "schemas").(map[string]any)
		for _, ref := range collectRefs(doc, nil) {
			name, ok := strings.CutPrefix(ref, v3SchemasRoot)
			if !ok {
				t.Errorf("%s: $ref %q is not a components schema", key, ref)
				continue
			}
			if _, ok := schemas[name]; !ok {
				t.Errorf("%s: $ref %q does not resolve", key, ref)
			}
		}
	}
}

// TestV3StrategicMergePatch computes a patch with the v3 schemas the way
// kubectl apply does, which depends on merge keys being reachable through
// the allOf-wrapped references.
func TestV3StrategicMergePatch(t *testing.T) {
	_, raw := v3Doc(t, sampleService(t), "apis/apps/v1")
	var doc spec3.OpenAPI
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decoding as spec3.OpenAPI: %v", err)
	}
	meta := strategicpatch.PatchMetaFromOpenAPIV3{
		SchemaList: doc.Components.Schemas,
		Schema:     doc.Components.Schemas["io.k8s.api.apps.v1.Deployment"],
	}
	original := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}}}`)
	modified := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"a:2"},{"name":"b","image":"b:1"}]}}}}`)
	patch, err := strategicpatch.CreateThreeWayMergePatch(original, modified, original, meta, false)
	if err != nil {
		t.Fatalf("CreateThreeWayMergePatch: %v", err)
	}
	if !strings.Contains(string(patch), `"$setElementOrder/containers"`) || !strings.Contains(string(patch), `"image":"a:2"`) {
		t.Errorf("patch = %s, want a merge-keyed container patch", patch)
	}
}

func TestV2Protobuf(t *testing.T) {
	s := sampleService(t)
	resp := get(t, s, "/openapi/v2?timeout=32s", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v2: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Errorf("Content-Type = %q", ct)
	}
	var doc openapi_v2.Document
	if err := proto.Unmarshal(readBody(t, resp), &doc); err != nil {
		t.Fatalf("proto.Unmarshal: %v", err)
	}
	if doc.GetSwagger() != "2.0" {
		t.Errorf("swagger = %q", doc.GetSwagger())
	}
	var service *openapi_v2.Schema
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		if d.GetName() == "io.k8s.api.core.v1.Service" {
			service = d.GetValue()
		}
	}
	if service == nil {
		t.Fatal("no io.k8s.api.core.v1.Service definition")
	}
	gvkFound := false
	for _, e := range service.GetVendorExtension() {
		if e.GetName() == extensionGVK && strings.Contains(e.GetValue().GetYaml(), "kind: Service") {
			gvkFound = true
		}
	}
	if !gvkFound {
		t.Error("Service definition has no x-kubernetes-group-version-kind")
	}
	var patch *openapi_v2.Operation
	for _, p := range doc.GetPaths().GetPath() {
		if p.GetName() == "/api/v1/namespaces/{namespace}/services/{name}" {
			patch = p.GetValue().GetPatch()
		}
	}
	if patch == nil {
		t.Fatal("no PATCH for services")
	}
	hasFV := slices.ContainsFunc(patch.GetParameters(), func(p *openapi_v2.ParametersItem) bool {
		np := p.GetParameter().GetNonBodyParameter().GetQueryParameterSubSchema()
		return np.GetName() == "fieldValidation"
	})
	if !hasFV {
		t.Error("v2 PATCH services lacks fieldValidation")
	}
}

func TestV2JSON(t *testing.T) {
	s := sampleService(t)
	resp := get(t, s, "/openapi/v2", "application/json")
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
	etag := resp.Header.Get("Etag")
	var doc map[string]any
	if err := json.Unmarshal(readBody(t, resp), &doc); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	defs := dig(t, doc, "definitions").(map[string]any)
	for _, ref := range collectRefs(doc, nil) {
		name, ok := strings.CutPrefix(ref, v2DefinitionsRoot)
		if _, found := defs[name]; !ok || !found {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}
	// IntOrString is published with its v2 form (a string with format).
	if f := dig(t, defs, "io.k8s.apimachinery.pkg.util.intstr.IntOrString", "format"); f != "int-or-string" {
		t.Errorf("IntOrString format = %v", f)
	}
	dig(t, doc, "paths", "/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "patch")

	req := httptest.NewRequest(http.MethodGet, "/openapi/v2", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("conditional GET: status %d, want 304", rec.Code)
	}
}

func TestNotFoundAndRedirect(t *testing.T) {
	s := sampleService(t)
	for _, p := range []string{"/openapi/v3/apis/batch/v1", "/openapi/v3/", "/openapi/v1", "/openapi/v2/x"} {
		if resp := get(t, s, p, "application/json"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, resp.StatusCode)
		}
	}
	resp := get(t, s, "/openapi/v3/api/v1?hash=stale", "application/json")
	if resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(resp.Header.Get("Location"), "/openapi/v3/api/v1?hash=") {
		t.Errorf("stale hash: status %d Location %q, want 301 to the current URL", resp.StatusCode, resp.Header.Get("Location"))
	}
	req := httptest.NewRequest(http.MethodPost, "/openapi/v2", nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", rec.Code)
	}
}

func TestNewRejects(t *testing.T) {
	for name, rs := range map[string][]Resource{
		"unknown kind":        {{GVK: gvk("example.com", "v1", "Widget"), Plural: "widgets", Namespaced: true}},
		"bad subresource":     {{GVK: gvk("", "v1", "Pod"), Plural: "pods", Namespaced: true, Subresources: []string{"log/x"}}},
		"duplicate":           {{GVK: gvk("", "v1", "Pod"), Plural: "pods"}, {GVK: gvk("", "v1", "Pod"), Plural: "pods"}},
		"missing plural":      {{GVK: gvk("", "v1", "Pod")}},
		"missing kind":        {{GVK: gvk("", "v1", ""), Plural: "pods"}},
		"kind without a list": {{GVK: gvk("autoscaling", "v1", "Scale"), Plural: "scales", Namespaced: true}},
	} {
		if _, err := New(rs); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{"rbac.authorization": "RbacAuthorization", "v1beta1": "V1beta1", "core": "Core", "flow-control": "FlowControl"} {
		if got := identifier(in, true); got != want {
			t.Errorf("identifier(%q) = %q, want %q", in, got, want)
		}
	}
	if got := friendlyName("k8s.io/api/core/v1.Service"); got != "io.k8s.api.core.v1.Service" {
		t.Errorf("friendlyName = %q", got)
	}
}

func collectRefs(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				out = append(out, s)
				continue
			}
			out = collectRefs(e, out)
		}
	case []any:
		for _, e := range v {
			out = collectRefs(e, out)
		}
	}
	return out
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// BenchmarkNew measures the API server's start-up cost of building the
// documents for the sample set of about twenty resources.
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		if _, err := New(sampleResources); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstServe measures building plus the first request of every
// document, which is when kube-openapi serializes and hashes them.
func BenchmarkFirstServe(b *testing.B) {
	for b.Loop() {
		s, err := New(sampleResources)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []string{"/openapi/v3", "/openapi/v2"} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, p, nil)
			req.Header.Set("Accept", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json")
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("GET %s: %d", p, rec.Code)
			}
		}
	}
}
