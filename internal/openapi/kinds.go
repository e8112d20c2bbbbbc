package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// extensionGVK is the vendor extension that ties a schema (as a list) or an
// operation (as a single object) to the group-version-kinds it serves.
const extensionGVK = "x-kubernetes-group-version-kind"

// schemeBuilders are the API groups whose types hack/update-openapi.sh
// generates definitions for. Keep the two lists in step.
var schemeBuilders = []func(*runtime.Scheme) error{
	corev1.AddToScheme,
	admissionregistrationv1.AddToScheme,
	appsv1.AddToScheme,
	autoscalingv1.AddToScheme,
	autoscalingv2.AddToScheme,
	batchv1.AddToScheme,
	discoveryv1.AddToScheme,
	networkingv1.AddToScheme,
	nodev1.AddToScheme,
	eventsv1.AddToScheme,
	storagev1.AddToScheme,
	coordinationv1.AddToScheme,
	policyv1.AddToScheme,
	rbacv1.AddToScheme,
	authenticationv1.AddToScheme,
	authorizationv1.AddToScheme,
	certificatesv1.AddToScheme,
	flowcontrolv1.AddToScheme,
	storagemigrationv1.AddToScheme,
	schedulingv1.AddToScheme,
	resourcev1.AddToScheme,
	apiextensionsv1.AddToScheme,
	apiregistrationv1.AddToScheme,
}

// kindIndex maps between group-version-kinds and OpenAPI model names, the
// same way kube-apiserver's definition namer does from its scheme: every Go
// type registered under some external group-version-kind gets those kinds as
// its x-kubernetes-group-version-kind list. Types registered in many groups
// (DeleteOptions, WatchEvent, ...) get one entry per group-version.
type kindIndex struct {
	models map[schema.GroupVersionKind]string // GVK -> model name
	gvks   map[string][]gvkExtension          // model name -> sorted GVKs
}

// gvkExtension is one element of x-kubernetes-group-version-kind. Field
// order does not matter: the value is serialized as a JSON object.
type gvkExtension struct {
	Group, Version, Kind string
}

func (g gvkExtension) value() map[string]any {
	return map[string]any{"group": g.Group, "version": g.Version, "kind": g.Kind}
}

func newKindIndex() (*kindIndex, error) {
	s := runtime.NewScheme()
	for _, add := range schemeBuilders {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering API types: %w", err)
		}
	}
	idx := &kindIndex{
		models: map[schema.GroupVersionKind]string{},
		gvks:   map[string][]gvkExtension{},
	}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name := modelName(t)
		idx.models[gvk] = name
		ext := gvkExtension{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
		if !slices.Contains(idx.gvks[name], ext) {
			idx.gvks[name] = append(idx.gvks[name], ext)
		}
	}
	for _, list := range idx.gvks {
		slices.SortFunc(list, func(a, b gvkExtension) int {
			return strings.Compare(a.Group+"/"+a.Version+"/"+a.Kind, b.Group+"/"+b.Version+"/"+b.Kind)
		})
	}
	return idx, nil
}

// model returns the OpenAPI model name of the type served as gvk.
func (idx *kindIndex) model(gvk schema.GroupVersionKind) (string, error) {
	name, ok := idx.models[gvk]
	if !ok {
		return "", fmt.Errorf("no Go type is registered for %s; add its API group to schemeBuilders and hack/update-openapi.sh", gvk)
	}
	return name, nil
}

// definitionName is the GetDefinitionName hook of kube-openapi's builders:
// it turns a generated definition key into the published schema name and
// tags top-level kinds with x-kubernetes-group-version-kind.
func (idx *kindIndex) definitionName(name string) (string, spec.Extensions) {
	name = friendlyName(name)
	list, ok := idx.gvks[name]
	if !ok {
		return name, nil
	}
	value := make([]any, len(list))
	for i, g := range list {
		value[i] = g.value()
	}
	return name, spec.Extensions{extensionGVK: value}
}

// openAPIModelNamer is implemented by k8s.io/api types whose package carries
// a +k8s:openapi-model-package tag; openapi-gen keys their definitions by it.
type openAPIModelNamer interface {
	OpenAPIModelName() string
}

// modelName returns the definition name of a Go type: its OpenAPIModelName
// when it has one, otherwise the upstream convention of the package path
// with its domain reversed plus the type name.
func modelName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n, ok := reflect.Zero(t).Interface().(openAPIModelNamer); ok {
		return n.OpenAPIModelName()
	}
	return friendlyName(t.PkgPath() + "." + t.Name())
}

// friendlyName turns a Go-path definition key such as
// "k8s.io/api/core/v1.Service" into "io.k8s.api.core.v1.Service". Keys that
// are already model names (no slash) are returned unchanged.
func friendlyName(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	parts := strings.Split(name, "/")
	if strings.Contains(parts[0], ".") {
		domain := strings.Split(parts[0], ".")
		slices.Reverse(domain)
		parts[0] = strings.Join(domain, ".")
	}
	return strings.Join(parts, ".")
}
