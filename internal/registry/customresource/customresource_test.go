package customresource

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"

	"github.com/svcnet/svcnet/internal/registry"
)

// noneConverters make the converters of definitions that need no webhook.
func noneConverters(t *testing.T) *conversion.CRConverterFactory {
	t.Helper()
	f, err := conversion.NewCRConverterFactory(webhookutil.NewDefaultServiceResolver(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func widgets(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: versions,
		},
	}
	registry.Scheme.Default(crd)
	return crd
}

func version(name string, served, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	min := 0.0
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: served, Storage: storage,
		Subresources: &apiextensionsv1.CustomResourceSubresources{
			Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
		},
		AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
			{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio"},
			{Name: "On", Type: "boolean", JSONPath: ".spec.on"},
			{Name: "Tags", Type: "string", JSONPath: ".spec.tags"},
			{Name: "Missing", Type: "string", JSONPath: ".spec.nothing"},
		},
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"replicas": {Type: "integer", Minimum: &min},
					"ratio":    {Type: "number"},
					"on":       {Type: "boolean"},
					"tags":     {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
					"color":    {Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"red"`)}},
				}},
				"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
			},
		}},
	}
}

func TestResourcesPerServedVersion(t *testing.T) {
	rs, err := Resources(widgets(version("v1", true, true), version("v1beta1", true, false), version("v1alpha1", false, false)), nil, false, noneConverters(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d resources, want the 2 served versions", len(rs))
	}
	for _, r := range rs {
		if r.Unstructured.StorageVersion != "v1" || r.Prefix() != "/registry/example.com/widgets/" || !r.Namespaced || !r.Status || r.Scale == nil {
			t.Errorf("%s: storage %q prefix %q namespaced %v status %v scale %v", r.Kind, r.Unstructured.StorageVersion, r.Prefix(), r.Namespaced, r.Status, r.Scale != nil)
		}
	}
}

func object(spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": spec}}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetName("w")
	u.SetNamespace("default")
	return u
}

func TestPruneDefaultValidate(t *testing.T) {
	rs, err := Resources(widgets(version("v1", true, true)), nil, false, noneConverters(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	u := object(map[string]interface{}{"replicas": int64(2), "bogus": "x"})
	u.Object["extra"] = true
	pruned := r.Unstructured.Prune(u.Object)
	if len(pruned) != 2 || pruned[0] != "extra" || pruned[1] != "spec.bogus" {
		t.Errorf("pruned %v, want [extra spec.bogus]", pruned)
	}
	r.Strategy.Default(u)
	if c, _, _ := unstructured.NestedString(u.Object, "spec", "color"); c != "red" {
		t.Errorf("color %q, want the default red", c)
	}
	if errs := r.Strategy.Validate(u); len(errs) != 0 {
		t.Errorf("valid object refused: %v", errs)
	}
	bad := object(map[string]interface{}{"replicas": int64(-1)})
	// The schema's minimum, and the scale subresource's own check.
	if errs := r.Strategy.Validate(bad); len(errs) != 2 || errs[0].Field != "spec.replicas" || errs[1].Field != ".spec.replicas" {
		t.Errorf("errors %v, want the schema's and the scale's on spec.replicas", errs)
	}
}

func TestColumnsAndScale(t *testing.T) {
	rs, err := Resources(widgets(version("v1", true, true)), nil, false, noneConverters(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	u := object(map[string]interface{}{"replicas": int64(3), "ratio": 0.5, "on": true, "tags": []interface{}{"a", "b"}})
	u.Object["status"] = map[string]interface{}{"replicas": int64(1)}
	want := []interface{}{"w", int64(3), 0.5, true, `["a","b"]`, nil}
	if len(r.Columns) != len(want) {
		t.Fatalf("%d columns, want %d", len(r.Columns), len(want))
	}
	for i, c := range r.Columns {
		if got := c.Cell(u); got != want[i] {
			t.Errorf("column %s: %#v, want %#v", c.Name, got, want[i])
		}
	}
	spec, status, _ := r.Scale.Get(u)
	if spec != 3 || status != 1 {
		t.Errorf("scale %d/%d, want 3/1", spec, status)
	}
	r.Scale.Set(u, 5)
	if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); n != 5 {
		t.Errorf("replicas %d after scaling to 5", n)
	}
}

func TestDefaultAgeColumnAndTerminating(t *testing.T) {
	v := version("v1", true, true)
	v.AdditionalPrinterColumns = nil
	rs, err := Resources(widgets(v), nil, true, noneConverters(t))
	if err != nil {
		t.Fatal(err)
	}
	r := rs[0]
	if len(r.Columns) != 2 || r.Columns[1].Name != "Age" {
		t.Errorf("columns %v, want NAME and the default Age", r.Columns)
	}
	ad, ok := r.Strategy.(registry.Admitter)
	if !ok {
		t.Fatal("a terminating definition's resource admits creates")
	}
	var obj runtime.Object = object(nil)
	if err := ad.Admit(t.Context(), obj); err == nil || err.Error() != `create is not supported on resources of kind "widgets.example.com"` {
		t.Errorf("create while terminating: %v", err)
	}
}
