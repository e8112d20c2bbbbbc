package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// viewVerbs are what discovery lists for a read-only view.
var viewVerbs = []string{"get", "list"}

// serveView answers a get or list of a read-only resource
// (registry.View) with what its view returns, in the formats of stored
// resources: the object, its list, a Table or metadata.
func (s *Server) serveView(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	if ri.subresource != "" || (ri.verb != "get" && ri.verb != "list") {
		return apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb)
	}
	if ri.verb == "get" {
		f, err := negotiate(r)
		if err != nil {
			return err
		}
		obj, err := ri.res.View.Get(r.Context(), ri.namespace, ri.name)
		if err != nil {
			return err
		}
		return s.writeOne(w, r, http.StatusOK, ri.res, f, obj)
	}
	f, _, topts, sel, err := readList(r, ri)
	if err != nil {
		return err
	}
	all, err := ri.res.View.List(r.Context(), ri.namespace)
	if err != nil {
		return err
	}
	var items []runtime.Object
	for _, o := range all {
		if sel.everything() || sel.matches(o) {
			items = append(items, o)
		}
	}
	switch f.as {
	case "Table":
		t, err := s.table(ri.res, items, topts.IncludeObject, false)
		if err != nil {
			return err
		}
		writeObject(w, http.StatusOK, f, t)
	case "PartialObjectMetadataList":
		l := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
		for _, o := range items {
			l.Items = append(l.Items, *partialMetadata(o))
		}
		writeObject(w, http.StatusOK, f, l)
	case "PartialObjectMetadata":
		return apierrors.NewBadRequest("a list cannot be returned as PartialObjectMetadata")
	default:
		l, err := s.listObject(ri.res, items, metav1.ListMeta{})
		if err != nil {
			return err
		}
		writeObject(w, http.StatusOK, f, l)
	}
	return nil
}
