package apibench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

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
	// Both kinds go through the same raw JSON requests, so that what is
	// measured is the API server's work, not the cost of a typed or an
	// unstructured client on the same two cores.
	rc := srv.Client.CoreV1().RESTClient()
	payload := strings.Repeat("x", 512)
	kinds := []struct{ path, apiVersion, kind string }{
		{"/apis/bench.svcnet.io/v1/namespaces/default/things", "bench.svcnet.io/v1", "Thing"},
		{"/api/v1/namespaces/default/configmaps", "v1", "ConfigMap"},
	}
	name := func(i int) string { return fmt.Sprintf("obj-%06d", i) }
	body := func(apiVersion, kind string, i int) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":%q},"data":{"payload":%q}}`, apiVersion, kind, name(i), payload))
	}
	do := func(req *rest.Request) error {
		_, err := req.SetHeader("Accept", "application/json").DoRaw(ctx)
		return err
	}
	ops := map[string]func(k int) func(i int) error{
		"create": func(k int) func(int) error {
			return func(i int) error {
				return do(rc.Post().AbsPath(kinds[k].path).SetHeader("Content-Type", "application/json").Body(body(kinds[k].apiVersion, kinds[k].kind, i)))
			}
		},
		"get": func(k int) func(int) error {
			return func(i int) error { return do(rc.Get().AbsPath(kinds[k].path, name(i))) }
		},
		"list": func(k int) func(int) error {
			return func(int) error { return do(rc.Get().AbsPath(kinds[k].path).Param("limit", "500")) }
		},
	}
	res := &CustomResourceResult{N: o.N, Workers: o.Workers}
	for _, step := range []string{"create", "get", "list"} {
		n := o
		if step == "list" {
			n.N = max(1, o.N/50)
		}
		c, m, err := alternate(step, n, ops[step](0), ops[step](1))
		if err != nil {
			return nil, err
		}
		res.Pairs = append(res.Pairs, [2]Stat{c, m})
	}
	return res, nil
}

// turns is how many slices of the N operations each kind runs.
const turns = 6

// alternate measures a and b over [0, N) in slices taken in turns (a b b a
// a b ...), so that neither gains from running first or last while etcd
// grows; elapsed times add up, p50 is the slices' median, p99 their
// highest.
func alternate(name string, o Options, a, b func(i int) error) (Stat, Stat, error) {
	var sa, sb []Stat
	per := max(1, o.N/turns)
	for t := 0; t*per < o.N; t++ {
		from := t * per
		slice := Options{N: min(per, o.N-from), Workers: o.Workers}
		shift := func(op func(int) error) func(int) error { return func(i int) error { return op(from + i) } }
		first, second := a, b
		if t%2 == 1 {
			first, second = b, a
		}
		x, y := measure(name, slice, shift(first)), measure(name, slice, shift(second))
		for _, m := range []measured{x, y} {
			if m.err != nil {
				return Stat{}, Stat{}, fmt.Errorf("%s: %w", name, m.err)
			}
		}
		if t%2 == 1 {
			x, y = y, x
		}
		sa, sb = append(sa, x.stat), append(sb, y.stat)
	}
	return combine(sa), combine(sb), nil
}

func combine(stats []Stat) Stat {
	out := Stat{Name: stats[0].Name}
	var p50s []time.Duration
	for _, s := range stats {
		out.Ops += s.Ops
		out.Elapsed += s.Elapsed
		out.P99 = max(out.P99, s.P99)
		p50s = append(p50s, s.P50)
	}
	out.P50, _ = percentiles(p50s)
	return out
}
