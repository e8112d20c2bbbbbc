// Package customresource describes the resources a CustomResourceDefinition
// defines, one registry.Resource per served version, so that the API
// server serves them with the same REST code as built-in kinds. The rules
// are upstream's own, from k8s.io/apiextensions-apiserver: the structural
// schema, pruning of unknown fields, defaulting, OpenAPI schema and CEL
// (x-kubernetes-validations) validation, list-type checks, the status and
// scale subresources, additionalPrinterColumns and selectableFields.
package customresource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	crstrategy "k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/customresourcedefinition"
)

// StoragePrefix is where a definition's objects live in etcd, as
// upstream's: /registry/<group>/<plural>/.
func StoragePrefix(group, plural string) string {
	return "/registry/" + group + "/" + plural + "/"
}

// Resources returns the served versions of crd as resources. static holds
// the built-in OpenAPI schemas (ObjectMeta, ...) the definitions' apply
// schemas refer to. The resources of a terminating definition refuse
// creates, as upstream's.
func Resources(crd *apiextensionsv1.CustomResourceDefinition, static map[string]*spec.Schema, terminating bool, converters *conversion.CRConverterFactory) ([]*registry.Resource, error) {
	internal, err := customresourcedefinition.Internal(crd)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", crd.Name, err)
	}
	storage, err := apiextensions.GetCRDStorageVersion(internal)
	if err != nil {
		return nil, err
	}
	converter, _, err := converters.NewConverter(crd)
	if err != nil {
		return nil, fmt.Errorf("conversion of %s: %w", crd.Name, err)
	}
	tc, err := typeConverter(crd, static)
	if err != nil {
		return nil, fmt.Errorf("apply schema of %s: %w", crd.Name, err)
	}
	var out []*registry.Resource
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		r, err := resource(crd, internal, v, storage, converter, tc, terminating)
		if err != nil {
			return nil, fmt.Errorf("%s version %s: %w", crd.Name, v.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func resource(crd *apiextensionsv1.CustomResourceDefinition, internal *apiextensions.CustomResourceDefinition,
	v apiextensionsv1.CustomResourceDefinitionVersion, storage string, converter runtime.ObjectConvertor, tc managedfields.TypeConverter, terminating bool) (*registry.Resource, error) {
	kind := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
	validation, err := apiextensions.GetSchemaForVersion(internal, v.Name)
	if err != nil {
		return nil, err
	}
	var props *apiextensions.JSONSchemaProps
	if validation != nil {
		props = validation.OpenAPIV3Schema
	}
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, fmt.Errorf("schema validator: %w", err)
	}
	subresources, err := apiextensions.GetSubresourcesForVersion(internal, v.Name)
	if err != nil {
		return nil, err
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var scale *apiextensions.CustomResourceSubresourceScale
	var statusValidator apiservervalidation.SchemaValidator
	if subresources != nil {
		status, scale = subresources.Status, subresources.Scale
	}
	if status != nil && props != nil {
		if s, ok := props.Properties["status"]; ok {
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&s); err != nil {
				return nil, fmt.Errorf("status validator: %w", err)
			}
		}
	}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	upstream := crstrategy.NewStrategy(nil, namespaced, kind, validator, statusValidator, structural, status, scale, v.SelectableFields)
	columns, err := columnsOf(v.AdditionalPrinterColumns)
	if err != nil {
		return nil, err
	}
	r := &registry.Resource{
		Kind:          kind,
		Resource:      crd.Spec.Names.Plural,
		Singular:      crd.Spec.Names.Singular,
		ShortNames:    crd.Spec.Names.ShortNames,
		Categories:    crd.Spec.Names.Categories,
		Namespaced:    namespaced,
		Status:        status != nil,
		Generation:    true,
		StoragePrefix: StoragePrefix(crd.Spec.Group, crd.Spec.Names.Plural),
		Strategy:      strategy{upstream: upstream, structural: structural},
		Columns:       columns,
		TypeConverter: tc,
		Unstructured: &registry.Unstructured{
			StorageVersion: storage,
			Converter:      converter,
			Prune: func(obj map[string]interface{}) []string {
				return pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			},
		},
	}
	if len(v.SelectableFields) > 0 {
		r.Fields = func(obj runtime.Object) fields.Set {
			_, set, err := upstream.GetAttrs(obj)
			if err != nil {
				return fields.Set{}
			}
			return set
		}
	}
	if scale != nil {
		r.Scale = scaleAccess(scale)
	}
	if terminating {
		r.Strategy = terminatingStrategy{r.Strategy.(strategy), r.GroupResource()}
	}
	return r, nil
}

// terminatingStrategy refuses creates while the definition is deleted.
type terminatingStrategy struct {
	strategy
	gr schema.GroupResource
}

func (t terminatingStrategy) Admit(context.Context, runtime.Object) error {
	return apierrors.NewMethodNotSupported(t.gr, "create")
}

// strategy runs upstream's custom resource strategy and the structural
// schema's defaults.
type strategy struct {
	registry.Base
	upstream interface {
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
		ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
	}
	structural *structuralschema.Structural
}

func (s strategy) Default(obj runtime.Object) {
	defaulting.Default(obj.(*unstructured.Unstructured).Object, s.structural)
}

func (s strategy) Validate(obj runtime.Object) field.ErrorList {
	return s.upstream.Validate(context.Background(), obj)
}

func (s strategy) ValidateUpdate(obj, old runtime.Object) field.ErrorList {
	return s.upstream.ValidateUpdate(context.Background(), obj, old)
}

// typeConverter describes every version of crd for server-side apply,
// from the schemas upstream publishes for it merged with the built-in
// ones, as upstream's custom resource handler.
func typeConverter(crd *apiextensionsv1.CustomResourceDefinition, static map[string]*spec.Schema) (managedfields.TypeConverter, error) {
	specs := []*spec3.OpenAPI{{Version: "3.0.0", Info: &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes CRD Swagger", Version: "v0.1.0"}},
		Components: &spec3.Components{Schemas: static}}}
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
}

// scaleAccess reads and writes replicas at the definition's JSON paths.
func scaleAccess(sc *apiextensions.CustomResourceSubresourceScale) *registry.ScaleAccess {
	specPath := pathOf(sc.SpecReplicasPath)
	statusPath := pathOf(sc.StatusReplicasPath)
	var selectorPath []string
	if sc.LabelSelectorPath != nil {
		selectorPath = pathOf(*sc.LabelSelectorPath)
	}
	return &registry.ScaleAccess{
		Get: func(obj runtime.Object) (int32, int32, string) {
			u := obj.(*unstructured.Unstructured).Object
			spec, _, _ := unstructured.NestedInt64(u, specPath...)
			status, _, _ := unstructured.NestedInt64(u, statusPath...)
			var sel string
			if selectorPath != nil {
				sel, _, _ = unstructured.NestedString(u, selectorPath...)
			}
			return int32(spec), int32(status), sel
		},
		Set: func(obj runtime.Object, replicas int32) {
			_ = unstructured.SetNestedField(obj.(*unstructured.Unstructured).Object, int64(replicas), specPath...)
		},
	}
}

// pathOf splits a simple JSON path (".spec.replicas").
func pathOf(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// ageColumn is the column upstream serves when a version declares none.
var ageColumn = apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date",
	Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}

// columnsOf turns additionalPrinterColumns into table columns after NAME,
// each cell its JSON path's first result, typed as upstream's table
// convertor types it.
func columnsOf(defs []apiextensionsv1.CustomResourceColumnDefinition) ([]registry.Column, error) {
	if len(defs) == 0 {
		defs = []apiextensionsv1.CustomResourceColumnDefinition{ageColumn}
	}
	cols := []registry.Column{registry.NameColumn()}
	for _, d := range defs {
		path := jsonpath.New(d.Name)
		if err := path.Parse("{" + d.JSONPath + "}"); err != nil {
			return nil, fmt.Errorf("unrecognized column definition %q", d.JSONPath)
		}
		path.AllowMissingKeys(true)
		desc := d.Description
		if desc == "" {
			desc = "Custom resource definition column (in JSONPath format): " + d.JSONPath
		}
		typ := d.Type
		cols = append(cols, registry.Column{
			TableColumnDefinition: metav1.TableColumnDefinition{Name: d.Name, Type: d.Type, Format: d.Format, Description: desc, Priority: d.Priority},
			Cell:                  func(o runtime.Object) interface{} { return cell(path, typ, o) },
		})
	}
	return cols, nil
}

func cell(path *jsonpath.JSONPath, typ string, o runtime.Object) interface{} {
	results, err := path.FindResults(o.(*unstructured.Unstructured).Object)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	value := results[0][0].Interface()
	if value == nil {
		return nil
	}
	switch typ {
	case "string":
		var buf bytes.Buffer
		if err := path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
			return nil
		}
		return buf.String()
	case "integer":
		switch n := value.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch n := value.(type) {
		case int64:
			return float64(n)
		case float64:
			return n
		case json.Number:
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if s, ok := value.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			return registry.Age(t)
		}
	}
	return nil
}
