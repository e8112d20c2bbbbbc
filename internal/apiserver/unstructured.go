package apiserver

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/internal/registry"
)

// This file holds what the generic REST code does differently for
// resources whose objects have no Go type (registry.Unstructured: custom
// resources). The verbs, watch, apply and tables are the same code; only
// making, decoding and converting an object differ, as in upstream's
// custom resource handler.

// newObject is an empty object of res.
func newObject(res *registry.Resource) (runtime.Object, error) {
	if res.Unstructured != nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(res.Kind)
		return u, nil
	}
	obj, err := registry.Scheme.New(res.Kind)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// newList is an empty list of res.
func newList(res *registry.Resource) (runtime.Object, error) {
	if res.Unstructured != nil {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(res.ListKind())
		return l, nil
	}
	l, err := registry.Scheme.New(res.ListKind())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return l, nil
}

// served is a stored object as res serves it: a custom resource stored at
// another version is converted to res's by its definition's strategy,
// with the defaults its schema has gained since it was written, as
// upstream defaults what it reads from etcd; an object of a typed
// resource stored at another version (registry.StorageVersion) is
// converted.
func served(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if obj == nil {
		return nil, nil
	}
	if res.Unstructured != nil {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		u, err := convertCustom(res, u, res.Kind.Version)
		if err != nil {
			return nil, err
		}
		res.Strategy.Default(u)
		return u, nil
	}
	if res.Storage == nil || kindOf(obj) != res.Storage.Kind {
		return obj, nil
	}
	out, err := res.Storage.FromStorage(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("converting %s to %s: %w", res.Storage.Kind, res.Kind, err))
	}
	return out, nil
}

// toStorage is obj as stored: a custom resource at its storage version,
// a typed object converted to its resource's storage kind.
func toStorage(res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	if res.Storage != nil && kindOf(obj) == res.Kind {
		out, err := res.Storage.ToStorage(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("converting %s to %s: %w", res.Kind, res.Storage.Kind, err))
		}
		return out, nil
	}
	if res.Unstructured == nil || res.Unstructured.StorageVersion == res.Kind.Version {
		return obj, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	return convertCustom(res, u, res.Unstructured.StorageVersion)
}

// convertCustom is a custom resource at another version of its
// definition: the object itself when it is at that version already.
func convertCustom(res *registry.Resource, u *unstructured.Unstructured, version string) (*unstructured.Unstructured, error) {
	gv := schema.GroupVersion{Group: res.Kind.Group, Version: version}
	if u.GetAPIVersion() == gv.String() {
		return u, nil
	}
	out, err := res.Unstructured.Converter.ConvertToVersion(u, gv)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out.(*unstructured.Unstructured), nil
}

// kindOf is the kind of a typed object's Go type.
func kindOf(obj runtime.Object) schema.GroupVersionKind {
	gvks, _, err := registry.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}
	}
	return gvks[0]
}

// decodeUnstructured reads a JSON or YAML body as an object of res,
// pruning the fields its schema does not declare: those are warnings, or
// refuse the write when the directive is Strict, as upstream's.
func decodeUnstructured(res *registry.Resource, kind schema.GroupVersionKind, contentType string, body []byte, directive string) (runtime.Object, []string, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = mediaJSON, nil
	}
	if err != nil {
		return nil, nil, unsupportedMedia(contentType)
	}
	switch mt {
	case mediaJSON:
	case "application/yaml":
		if body, err = yaml.YAMLToJSON(body); err != nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
	default:
		return nil, nil, unsupportedMedia(contentType)
	}
	var content map[string]interface{}
	var problems []string
	strictErrs, err := kjson.UnmarshalStrict(body, &content, kjson.DisallowDuplicateFields)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind.Kind, kind.Version, kind.Kind, err))
	}
	if directive != metav1.FieldValidationIgnore {
		for _, e := range strictErrs {
			problems = append(problems, e.Error())
		}
	}
	u := &unstructured.Unstructured{Object: content}
	if content == nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: Object 'Kind' is missing in 'null'", kind.Kind, kind.Version, kind.Kind))
	}
	got := u.GroupVersionKind()
	if got.Kind == "" {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: Object 'Kind' is missing in '%s'", kind.Kind, kind.Version, kind.Kind, body))
	}
	if got.GroupVersion() != kind.GroupVersion() {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), kind.GroupVersion()))
	}
	if got.Kind != kind.Kind {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", got.Kind, kind.Kind))
	}
	if res.Unstructured.Prune != nil {
		for _, p := range res.Unstructured.Prune(u.Object) {
			if directive != metav1.FieldValidationIgnore {
				problems = append(problems, fmt.Sprintf("unknown field %q", p))
			}
		}
	}
	if len(problems) > 0 && directive == metav1.FieldValidationStrict {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s",
			kind.Kind, kind.Version, kind.Kind, strings.Join(problems, ", ")))
	}
	return u, problems, nil
}

// withoutProtobuf drops the protobuf entries of a request's Accept header
// that ask for the objects themselves, which have no protobuf form; their
// metadata and tables keep theirs. Nothing left is upstream's 406.
func withoutProtobuf(r *http.Request) error {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return nil
	}
	var kept []string
	for _, entry := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err == nil && mt == mediaProtobuf && params["as"] == "" {
			continue
		}
		kept = append(kept, entry)
	}
	if len(kept) == 0 {
		return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
			"only the following media types are accepted: application/json, application/yaml", 0, false)
	}
	r.Header.Set("Accept", strings.Join(kept, ","))
	return nil
}

// unstructuredPatchTypes are the patches a custom resource takes: it has
// no Go struct to read strategic merge keys from.
var unstructuredPatchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}

// unsupportedPatch is upstream's 415 for a strategic merge patch of a
// custom resource.
func unsupportedPatch(pt string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(unstructuredPatchTypes, ", ")), 0, false)
}

// spec is an unstructured object's fields but its type, metadata and
// status: what a change of bumps metadata.generation.
func spec(u *unstructured.Unstructured) map[string]interface{} {
	out := make(map[string]interface{}, len(u.Object))
	for k, v := range u.Object {
		switch k {
		case "metadata", "apiVersion", "kind", "status":
			continue
		}
		out[k] = v
	}
	return out
}

// unstructuredSpecEqual is specEqual for objects without a Go type:
// everything but metadata and status.
func unstructuredSpecEqual(a, b *unstructured.Unstructured) bool {
	return apiequality.Semantic.DeepEqual(spec(a), spec(b))
}
