package apibench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
)

// CustomResourceResult compares create, get and list of a custom resource
// with those of ConfigMaps holding the same data, in the same run against
// the same API server.
type CustomResourceResult struct {
	N, Workers int
	Pairs      [][2]Stat // custom resource, ConfigMap
}

// Print writes the result with the custom resource/ConfigMap ratios.
func (r *CustomResourceResult) Print(w io.Writer) {
	fmt.Fprintf(w, "%d objects of each kind, %d workers\n", r.N, r.Workers)
	fmt.Fprintf(w, "%-10s %10s %10s %10s | %-10s %10s %10s %10s | %8s\n", "custom", "ops/s", "p50", "p99", "configmap", "ops/s", "p50", "p99", "ratio")
	for _, p := range r.Pairs {
		c, m := p[0], p[1]
		fmt.Fprintf(w, "%-10s %10.0f %10s %10s | %-10s %10.0f %10s %10s | %8.3f\n",
			c.Name, c.Rate(), round(c.P50), round(c.P99), m.Name, m.Rate(), round(m.P50), round(m.P99), c.Rate()/m.Rate())
	}
}

var benchGVR = schema.GroupVersionResource{Group: "bench.svcnet.io", Version: "v1", Resource: "things"}

// thingCRD defines Thing, whose spec holds string data as a ConfigMap's.
func thingCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.bench.svcnet.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: benchGVR.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Singular: "thing", Kind: "Thing", ListKind: "ThingList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"data": {Type: "object",
						AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}},
				}}}},
		},
	}
}

// RunCustomResources starts an API server, defines Thing and measures.
func RunCustomResources(ctx context.Context, o Options) (*CustomResourceResult, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	crds, err := crdclient.NewForConfig(srv.Config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		return nil, err
	}
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, thingCRD(), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("define Thing: %w", err)
	}
	things := dyn.Resource(benchGVR).Namespace(metav1.NamespaceDefault)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := things.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("Thing is not served: %w", err)
	}
	cms := srv.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault)
	data := map[string]string{"payload": strings.Repeat("x", 512)}
	name := func(i int) string { return fmt.Sprintf("obj-%06d", i) }
	thing := func(i int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"data": map[string]interface{}{"payload": data["payload"]}}}
		u.SetAPIVersion("bench.svcnet.io/v1")
		u.SetKind("Thing")
		u.SetName(name(i))
		return u
	}
	// The two kinds take turns, so that neither gains from a warmer cache
	// or a fresher etcd.
	steps := []struct {
		name   string
		custom func(i int) error
		cm     func(i int) error
	}{
		{"create",
			func(i int) error { _, err := things.Create(ctx, thing(i), metav1.CreateOptions{}); return err },
			func(i int) error {
				_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: data}, metav1.CreateOptions{})
				return err
			}},
		{"get",
			func(i int) error { _, err := things.Get(ctx, name(i), metav1.GetOptions{}); return err },
			func(i int) error { _, err := cms.Get(ctx, name(i), metav1.GetOptions{}); return err }},
		{"list",
			func(int) error { _, err := things.List(ctx, metav1.ListOptions{Limit: 500}); return err },
			func(int) error { _, err := cms.List(ctx, metav1.ListOptions{Limit: 500}); return err }},
	}
	res := &CustomResourceResult{N: o.N, Workers: o.Workers}
	for _, st := range steps {
		ops := o
		if st.name == "list" {
			ops.N = max(1, o.N/50)
		}
		c := measure(st.name, ops, st.custom)
		m := measure(st.name, ops, st.cm)
		for _, x := range []measured{c, m} {
			if x.err != nil {
				return nil, fmt.Errorf("%s: %w", x.stat.Name, x.err)
			}
		}
		res.Pairs = append(res.Pairs, [2]Stat{c.stat, m.stat})
	}
	return res, nil
}
