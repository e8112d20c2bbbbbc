package registry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestJSONCodecRoundTrip(t *testing.T) {
	cm, err := JSONCodec{}.Encode(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]interface{}{"name": "w"}, "spec": map[string]interface{}{"size": int64(3)}}}
	cr, err := JSONCodec{}.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	// A custom resource stored with a built-in group's apiVersion first
	// still decodes typed.
	apps := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}`)
	for _, c := range []struct {
		data   []byte
		custom bool
	}{{cm, false}, {cr, true}, {apps, false}} {
		if got := customGroup(c.data); got != c.custom {
			t.Errorf("customGroup(%s) = %v", c.data, got)
		}
		obj, err := JSONCodec{}.Decode(c.data)
		if err != nil {
			t.Fatalf("decode %s: %v", c.data, err)
		}
		if _, isU := obj.(*unstructured.Unstructured); isU != c.custom {
			t.Errorf("decode %s: %T", c.data, obj)
		}
	}
	obj, _ := JSONCodec{}.Decode(cr)
	if n, _, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "size"); n != 3 {
		t.Errorf("size %d after a round trip", n)
	}
}
