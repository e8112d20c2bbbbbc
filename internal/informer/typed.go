package informer

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Typed is a transform (cache.SharedInformer.SetTransform) that stores a
// dynamic informer's objects as Go type T, for the kinds whose Go types
// come with no clientset (MetalLB's, the Gateway API's). An object that
// does not convert (the API server validated it against the same schema)
// is stored as it came, and List skips it.
func Typed[T any](obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone, or already typed
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return obj, nil //nolint:nilerr // kept as it came; List skips it
	}
	return out, nil
}

// List is what store holds of type T.
func List[T any](store cache.Store) []*T {
	var out []*T
	for _, obj := range store.List() {
		if t, ok := obj.(*T); ok {
			out = append(out, t)
		}
	}
	return out
}
