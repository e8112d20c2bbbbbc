package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// widgetCRD is a definition with what users lean on: a structural schema
// with descriptions, defaults, an enum, a CEL rule, a map-type list, the
// status subresource, printer columns and the "all" category.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.size <= self.maxSize"
              message: "size must not exceed maxSize"
            properties:
              size: {type: integer, minimum: 0, description: "How big the widget is."}
              maxSize: {type: integer, default: 10}
              color: {type: string, enum: [red, green, blue], default: red}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
          status:
            type: object
            properties:
              ready: {type: boolean}
`

func widget(name, spec string) string {
	return "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + "}\nspec: " + spec + "\n"
}

// TestCustomResourceDefinitions: a definition is served like a built-in
// kind, with upstream's validation, pruning, defaults, columns, apply,
// watch and cleanup, and bad definitions are refused with upstream's
// causes.
func TestCustomResourceDefinitions(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.withStdin(widgetCRD, "apply", "-f", "-")
	c.must("wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.example.com")
	if out := c.must("get", "crd", "widgets.example.com", "-o", "jsonpath={.status.conditions[?(@.type==\"NamesAccepted\")].reason}"); out != "NoConflicts" {
		t.Errorf("NamesAccepted reason %q, want NoConflicts", out)
	}
	// Each served group version is a Local APIService, as the
	// aggregator's autoregistration makes them: the built-in ones and the
	// definition's.
	eventually(t, 10*time.Second, func() string {
		out, err := c.kubectl("", "get", "apiservices", "v1.apps", "v1.example.com", "--no-headers")
		if got := normalize(strings.Split(out, "\n")); err != nil || got != "v1.apps Local True AGE\nv1.example.com Local True AGE" {
			return fmt.Sprintf("kubectl get apiservices: %v\n%s", err, out)
		}
		return ""
	})

	// A client-go dynamic informer follows the custom resources.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Informer()
	var mu sync.Mutex
	seen := map[string]int{}
	note := func(event string) func(any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			mu.Lock()
			defer mu.Unlock()
			seen[event+" "+obj.(*unstructured.Unstructured).GetName()]++
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: note("add"), UpdateFunc: func(_, cur any) { note("update")(cur) }, DeleteFunc: note("delete"),
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("dynamic informer did not sync")
	}

	// kubectl explain reads the published schema.
	if out := c.must("explain", "widgets.spec.size"); !strings.Contains(out, "How big the widget is.") {
		t.Errorf("kubectl explain:\n%s", out)
	}

	// Unknown fields: refused with --validate=strict, pruned otherwise.
	if out, err := c.kubectl(widget("w1", "{size: 3, bogus: 1}"), "create", "--validate=strict", "-f", "-"); err == nil ||
		!strings.Contains(out, `strict decoding error: unknown field "spec.bogus"`) {
		t.Errorf("strict create of an unknown field: err %v\n%s", err, out)
	}
	if out := c.withStdin(widget("w1", "{size: 3, bogus: 1, ports: [{name: a, port: 1}]}"), "create", "--validate=false", "-f", "-"); !strings.Contains(out, "widget.example.com/w1 created") {
		t.Errorf("create: %s", out)
	}
	spec := c.must("get", "widget", "w1", "-o", "jsonpath={.spec}")
	if strings.Contains(spec, "bogus") || !strings.Contains(spec, `"color":"red"`) || !strings.Contains(spec, `"maxSize":10`) {
		t.Errorf("stored spec %s: want bogus pruned, color and maxSize defaulted", spec)
	}

	// CEL: upstream's 422.
	if out, err := c.kubectl(widget("big", "{size: 30}"), "create", "-f", "-"); err == nil ||
		!strings.Contains(out, `The Widget "big" is invalid: spec: Invalid value:`) || !strings.Contains(out, "size must not exceed maxSize") {
		t.Errorf("create breaking the CEL rule: err %v\n%s", err, out)
	}
	// The OpenAPI schema: enum and minimum.
	if out, err := c.kubectl(widget("pink", "{size: -1, color: pink}"), "create", "-f", "-"); err == nil ||
		!strings.Contains(out, `spec.color: Unsupported value: "pink": supported values: "red", "green", "blue"`) ||
		!strings.Contains(out, "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0") {
		t.Errorf("create breaking the schema: err %v\n%s", err, out)
	}

	// Printer columns, short name and the "all" category.
	table := c.must("get", "wd")
	if !strings.HasPrefix(table, "NAME   SIZE   COLOR   AGE\nw1     3      red") {
		t.Errorf("kubectl get wd:\n%s", table)
	}
	if out := c.must("get", "all"); !strings.Contains(out, "widget.example.com/w1") {
		t.Errorf("kubectl get all lacks the widget:\n%s", out)
	}

	// Server-side apply merges a map-type list by its key.
	c.withStdin(widget("s1", "{size: 1, ports: [{name: a, port: 1}]}"), "apply", "--server-side", "--field-manager=one", "-f", "-")
	c.withStdin(widget("s1", "{ports: [{name: b, port: 2}]}"), "apply", "--server-side", "--field-manager=two", "-f", "-")
	if out := c.must("get", "widget", "s1", "-o", "jsonpath={.spec.ports}"); out != `[{"name":"a","port":1},{"name":"b","port":2}]` {
		t.Errorf("ports after two appliers: %s", out)
	}
	// Apply is not pruned: the field manager refuses what the schema lacks.
	if out, err := c.kubectl(widget("s1", "{bogus: 1}"), "apply", "--server-side", "--field-manager=three", "-f", "-"); err == nil ||
		!strings.Contains(out, ".spec.bogus: field not declared in schema") {
		t.Errorf("apply of an unknown field: err %v\n%s", err, out)
	}

	// The status subresource: the main resource ignores status, the
	// subresource takes only status; spec changes bump the generation.
	c.must("patch", "widget", "s1", "--type=merge", "-p", `{"spec":{"color":"blue"},"status":{"ready":true}}`)
	c.must("patch", "widget", "s1", "--subresource=status", "--type=merge", "-p", `{"spec":{"color":"green"},"status":{"ready":true}}`)
	if out := c.must("get", "widget", "s1", "-o", "jsonpath={.spec.color} {.status.ready} {.metadata.generation}"); out != "blue true 3" {
		t.Errorf("color, ready, generation = %q, want \"blue true 3\"", out)
	}
	// No strategic merge patch for a kind without Go struct tags.
	if out := c.fails("patch", "widget", "s1", "-p", `{"spec":{"color":"red"}}`); !strings.Contains(out, "application/strategic-merge-patch+json is not supported") {
		t.Errorf("strategic merge patch: %s", out)
	}
	c.must("delete", "widget", "w1")
	eventually(t, 10*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		if seen["add w1"] != 1 || seen["add s1"] != 1 || seen["update s1"] < 3 || seen["delete w1"] != 1 {
			return fmt.Sprintf("informer saw %v", seen)
		}
		return ""
	})

	// Deleting the definition removes its objects: defined again, it
	// has none.
	c.must("delete", "crd", "widgets.example.com", "--timeout=60s")
	c.withStdin(widgetCRD, "apply", "-f", "-")
	c.must("wait", "--for=condition=Established", "--timeout=30s", "crd/widgets.example.com")
	if out := c.must("get", "widgets", "-A"); !strings.Contains(out, "No resources found") {
		t.Errorf("widgets after the definition was deleted and made again:\n%s", out)
	}
}

// TestCustomResourceDefinitionBadInput: definitions upstream refuses are
// refused with its causes, and nothing is stored.
func TestCustomResourceDefinitionBadInput(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	// A kind nothing defines: kubectl's words after it looked for its
	// definition, as against kube-apiserver (issue 13).
	out, err := c.kubectl(widget("w1", "{size: 1}"), "create", "-f", "-")
	if err == nil || !strings.Contains(out, `no matches for kind "Widget" in version "example.com/v1"`) || !strings.Contains(out, "ensure CRDs are installed first") {
		t.Errorf("create of an undefined kind: err %v\n%s", err, out)
	}
	if out := c.fails("get", "--raw", "/apis/example.com/v1/widgets"); !strings.Contains(out, "the server could not find the requested resource") {
		t.Errorf("an unserved group: %s", out)
	}
	nonStructural := strings.Replace(widgetCRD, "              size: {type: integer, minimum: 0, description: \"How big the widget is.\"}\n",
		"              size: {minimum: 0}\n", 1)
	out, err = c.kubectl(nonStructural, "create", "-f", "-")
	if err == nil || !strings.Contains(out, `The CustomResourceDefinition "widgets.example.com" is invalid`) ||
		!strings.Contains(out, "spec.validation.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields") {
		t.Errorf("non-structural schema: err %v\n%s", err, out)
	}
	badCEL := strings.Replace(widgetCRD, `"self.size <= self.maxSize"`, `"self.size <= "`, 1)
	out, err = c.kubectl(badCEL, "create", "-f", "-")
	if err == nil || !strings.Contains(out, "x-kubernetes-validations[0].rule: Invalid value:") || !strings.Contains(out, "compilation failed") {
		t.Errorf("bad CEL rule: err %v\n%s", err, out)
	}
	if out := c.fails("get", "crd", "widgets.example.com"); !strings.Contains(out, `customresourcedefinitions.apiextensions.k8s.io "widgets.example.com" not found`) {
		t.Errorf("a refused definition was stored: %s", out)
	}
}

// gizmoCRD serves v1 and v2 of one kind, stored at v1, with the None
// conversion; v1beta1 is defined but not served.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  scope: Cluster
  versions:
  - {name: v1beta1, served: false, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v2, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// TestCustomResourceVersions: every served version reads and writes the
// same objects, stored at the storage version; discovery prefers the
// highest version; an unserved version is not found; a cluster-scoped kind
// keeps unknown fields where its schema says so.
func TestCustomResourceVersions(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.withStdin(gizmoCRD, "apply", "-f", "-")
	c.must("wait", "--for=condition=Established", "--timeout=30s", "crd/gizmos.example.com")
	c.withStdin("apiVersion: example.com/v2\nkind: Gizmo\nmetadata: {name: g1}\nspec: {anything: [1, 2]}\n", "create", "-f", "-")
	if out := c.must("get", "gizmos.v1.example.com", "g1", "-o", "jsonpath={.apiVersion} {.spec.anything}"); out != "example.com/v1 [1,2]" {
		t.Errorf("read at v1: %q", out)
	}
	if out := c.must("get", "gizmo", "g1", "-o", "jsonpath={.apiVersion}"); out != "example.com/v2" {
		t.Errorf("kubectl's preferred version: %q, want example.com/v2", out)
	}
	if out := c.must("get", "--raw", "/apis/example.com"); !strings.Contains(out, `"preferredVersion":{"groupVersion":"example.com/v2","version":"v2"}`) {
		t.Errorf("group discovery: %s", out)
	}
	if out := c.fails("get", "--raw", "/apis/example.com/v1beta1/gizmos"); !strings.Contains(out, "NotFound") && !strings.Contains(out, "not found") {
		t.Errorf("the unserved version answers: %s", out)
	}
	// Server-side apply at a version that is not the storage version.
	c.withStdin("apiVersion: example.com/v2\nkind: Gizmo\nmetadata: {name: g2}\nspec: {applied: done}\n", "apply", "--server-side", "-f", "-")
	if out := c.must("get", "gizmos.v2.example.com", "g2", "-o", "jsonpath={.apiVersion} {.spec.applied}"); out != "example.com/v2 done" {
		t.Errorf("applied at v2: %q", out)
	}
	c.must("patch", "gizmos.v1.example.com", "g1", "--type=merge", "-p", `{"spec":{"more":true}}`)
	if out := c.must("get", "gizmos.v2.example.com", "g1", "-o", "jsonpath={.spec.more} {.status.storedVersions}"); out != "true " {
		t.Errorf("v2 after a v1 patch: %q", out)
	}
	if out := c.must("get", "crd", "gizmos.example.com", "-o", "jsonpath={.status.storedVersions}"); out != `["v1"]` {
		t.Errorf("storedVersions %s", out)
	}
	// A restarted server serves the stored definitions once it is up.
	c.restart()
	if out := c.must("get", "gizmo", "g1", "-o", "jsonpath={.spec.more}"); out != "true" {
		t.Errorf("after a restart: %q", out)
	}
}
