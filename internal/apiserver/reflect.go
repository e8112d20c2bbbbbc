package apiserver

import (
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Every built-in kind is a struct with TypeMeta, ObjectMeta and its own
// fields, usually Spec and Status; a custom resource is a map with the
// same top-level keys. These helpers let the generic write path
// treat status and spec the way upstream strategies all do, without one
// function per kind.

func structOf(obj runtime.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v
}

// resetStatus zeroes obj.Status.
func resetStatus(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		delete(u.Object, "status")
		return
	}
	if f := structOf(obj).FieldByName("Status"); f.IsValid() && f.CanSet() {
		f.Set(reflect.Zero(f.Type()))
	}
}

// copyStatus sets dst.Status to src.Status.
func copyStatus(dst, src runtime.Object) {
	if d, ok := dst.(*unstructured.Unstructured); ok {
		if st, found := src.(*unstructured.Unstructured).Object["status"]; found {
			d.Object["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(d.Object, "status")
		}
		return
	}
	d, s := structOf(dst).FieldByName("Status"), structOf(src).FieldByName("Status")
	if d.IsValid() && s.IsValid() && d.CanSet() {
		d.Set(s)
	}
}

// withStatusOf returns a copy of base carrying the status of from: what a
// write to the status subresource stores.
func withStatusOf(base, from runtime.Object) runtime.Object {
	out := base.DeepCopyObject()
	copyStatus(out, from)
	return out
}

// specEqual compares everything but type and object metadata and status:
// the "spec" whose change bumps metadata.generation.
func specEqual(a, b runtime.Object) bool {
	if ua, ok := a.(*unstructured.Unstructured); ok {
		return unstructuredSpecEqual(ua, b.(*unstructured.Unstructured))
	}
	va, vb := structOf(a), structOf(b)
	t := va.Type()
	for i := 0; i < t.NumField(); i++ {
		switch t.Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
			continue
		}
		if !apiequality.Semantic.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			return false
		}
	}
	return true
}
