// Package openapi serves the OpenAPI v2 and v3 documents of the built-in
// Kubernetes resources svcnet serves.
//
// kubectl depends on these documents more than on any other endpoint apart
// from discovery:
//
//   - With its default --validate=strict, kubectl looks up the object's
//     group-version document in the /openapi/v3 index, finds the PATCH
//     operation tagged with the object's x-kubernetes-group-version-kind
//     and, if that operation declares the fieldValidation query parameter,
//     leaves field validation to the server. Otherwise it validates on the
//     client against /openapi/v2, which must then be served as protobuf
//     (always the case for `kind: List` files).
//   - `kubectl apply` computes strategic merge patches from the v3 schemas'
//     x-kubernetes-patch-strategy and x-kubernetes-patch-merge-key when the
//     PATCH operation accepts application/strategic-merge-patch+json.
//   - `kubectl explain` prints the v3 schema descriptions.
//
// The schemas come from k8s.io/kube-openapi's openapi-gen (see the generated
// subpackage and hack/update-openapi.sh), so they carry upstream's
// descriptions and extensions. The paths are described here, in
// kube-apiserver's shape, from the list of served resources. Serving,
// content negotiation (JSON or protobuf), ETags and the v3 index with its
// ?hash= URLs and immutable caching are kube-openapi's handler and handler3.
package openapi

//go:generate ../../hack/update-openapi.sh

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Serving paths.
const (
	pathV2 = "/openapi/v2"
	pathV3 = "/openapi/v3"
)

// Resource is one served resource.
type Resource struct {
	GVK        schema.GroupVersionKind // e.g. apps/v1 Deployment
	Plural     string                  // "deployments"
	Namespaced bool
	// Subresources are "scale" (of autoscaling/v1 Scale) and those of
	// the kind itself ("status", "approval").
	Subresources []string
	// CreateOnly is a virtual resource (a review): only its create is
	// served, and it has no list kind.
	CreateOnly bool
	// Actions are create-only subresources with the kind each posts.
	Actions map[string]schema.GroupVersionKind
}

// Service serves /openapi/v2 and /openapi/v3[/...].
type Service struct {
	v2      http.Handler
	v2Doc   *handler.OpenAPIService
	builtin *spec.Swagger // the v2 document of the built-in resources
	v3      *handler3.OpenAPIService
	static  map[string]*spec.Schema // v3 schemas custom resources refer to

	mu            sync.RWMutex
	groupVersions map[string]bool // v3 index keys: "api/v1", "apis/apps/v1"
	custom        map[string]bool // the keys of custom resources' documents
}

// New builds the documents for resources. It fails if a resource's kind is
// not one of the generated built-in types, or if a resource is malformed.
//
// Only the document structures are built here; kube-openapi's handlers
// serialize each document on its first request and cache the bytes.
func New(resources []Resource) (*Service, error) {
	idx, err := newKindIndex()
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	gvs, err := buildGroupVersions(resources, idx)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}

	swagger, err := buildV2(gvs, idx)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	mux := http.NewServeMux()
	v2Doc := handler.NewOpenAPIService(swagger)
	v2Doc.RegisterOpenAPIVersionedService(pathV2, mux)

	v3 := handler3.NewOpenAPIService()
	defs := v3Definitions(idx)
	static, err := metaSchemas(defs, idx)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	s := &Service{v2: mux, v2Doc: v2Doc, builtin: swagger, v3: v3, static: static,
		groupVersions: map[string]bool{}, custom: map[string]bool{}}
	for _, g := range gvs {
		doc, err := buildV3(g, defs, idx)
		if err != nil {
			return nil, fmt.Errorf("openapi: %w", err)
		}
		v3.UpdateGroupVersion(g.key, doc)
		s.groupVersions[g.key] = true
	}
	return s, nil
}

// ServeHTTP answers GET and HEAD for /openapi/v2, the /openapi/v3 index and
// the /openapi/v3/<group-version> documents; any other path is 404.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("the server does not allow method %s on %s", r.Method, r.URL.Path))
		return
	}
	switch p := r.URL.Path; {
	case p == pathV2:
		s.v2.ServeHTTP(w, r)
	case p == pathV3:
		s.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(p, pathV3+"/") && s.served(strings.TrimPrefix(p, pathV3+"/")):
		// handler3 answers an unknown group-version with an empty 200, so
		// only known ones reach it.
		s.v3.HandleGroupVersion(w, r)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	}
}

// writeStatus answers with a Kubernetes Status object, which kubectl turns
// into a readable error.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	body, err := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	})
	if err != nil {
		http.Error(w, message, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func (s *Service) served(key string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.groupVersions[key] || s.custom[key]
}

// StaticSchemas are the v3 schemas of the meta types (ObjectMeta, ...)
// that custom resource schemas refer to.
func (s *Service) StaticSchemas() map[string]*spec.Schema { return s.static }

// SetCustomResources replaces the documents of custom resources: v2 are
// merged into /openapi/v2 beside the built-in resources, and v3 are the
// documents of their group-versions, keyed "apis/<group>/<version>".
func (s *Service) SetCustomResources(v2 []*spec.Swagger, v3 map[string]*spec3.OpenAPI) error {
	merged, err := mergeV2(s.builtin, v2)
	if err != nil {
		return fmt.Errorf("openapi: merge custom resources: %w", err)
	}
	if err := s.v2Doc.UpdateSpec(merged); err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.custom {
		if _, ok := v3[key]; !ok {
			s.v3.DeleteGroupVersion(key)
		}
	}
	s.custom = map[string]bool{}
	for key, doc := range v3 {
		if s.groupVersions[key] {
			return fmt.Errorf("openapi: %s is a built-in group-version", key)
		}
		s.v3.UpdateGroupVersion(key, doc)
		s.custom[key] = true
	}
	return nil
}
