package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/registry"
)

var parameterCodec = runtime.NewParameterCodec(registry.Scheme)

// optionsVersion is the group-version the meta option types are registered
// under for query-parameter decoding.
var optionsVersion = schema.GroupVersion{Version: "v1"}

func decodeQuery(r *http.Request, into runtime.Object) error {
	gv := optionsVersion
	if _, ok := into.(*metav1.TableOptions); ok {
		gv = metav1.SchemeGroupVersion // registered only under meta.k8s.io
	}
	if err := parameterCodec.DecodeParameters(r.URL.Query(), gv, into); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// serveResource runs one verb on a resolved resource path.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	if ri.res.Unstructured != nil {
		if err := withoutProtobuf(r); err != nil {
			writeError(w, r, err)
			return
		}
	}
	if ri.subresource == "log" {
		if err := s.servePodLog(w, r, ri); err != nil {
			writeError(w, r, err)
		}
		return
	}
	if ri.subresource == proxySubresource {
		if err := s.serveProxy(w, r, ri); err != nil {
			writeError(w, r, err)
		}
		return
	}
	if streamSubresources[ri.subresource] {
		if err := s.servePodStream(w, r, ri); err != nil {
			writeError(w, r, err)
		}
		return
	}
	if action, ok := ri.res.Actions[ri.subresource]; ok {
		if err := s.serveAction(w, r, ri, action); err != nil {
			writeError(w, r, err)
		}
		return
	}
	if ri.res.View != nil {
		if err := s.serveView(w, r, ri); err != nil {
			writeError(w, r, err)
		}
		return
	}
	if ri.res.Create != nil {
		if err := s.serveVirtual(w, r, ri); err != nil {
			writeError(w, r, err)
		}
		return
	}
	err := subresourceAllows(ri)
	if err == nil {
		switch ri.verb {
		case "get":
			err = s.serveGet(w, r, ri)
		case "list":
			err = s.serveList(w, r, ri)
		case "watch":
			err = s.serveWatch(w, r, ri)
		case "create":
			if ri.subresource == "binding" {
				err = s.serveBinding(w, r, ri)
			} else {
				err = s.serveCreate(w, r, ri)
			}
		case "update":
			err = s.serveUpdate(w, r, ri)
		case "patch":
			err = s.servePatch(w, r, ri)
		case "delete":
			err = s.serveDelete(w, r, ri)
		case "deletecollection":
			err = s.serveDeleteCollection(w, r, ri)
		default:
			err = apierrors.NewMethodNotSupported(ri.res.GroupResource(), ri.verb)
		}
	}
	if err != nil {
		writeError(w, r, err)
	}
}

// subresourceAllows reports whether the path takes the verb.
func subresourceAllows(ri *requestInfo) error {
	ok := true
	switch ri.subresource {
	case "":
		ok = ri.verb != "create" || ri.name == ""
	case "finalize":
		ok = ri.verb == "update"
	case "binding":
		ok = ri.verb == "create"
	default:
		ok = ri.verb == "get" || ri.verb == "update" || ri.verb == "patch"
	}
	if ok {
		return nil
	}
	gr := ri.res.GroupResource()
	if ri.subresource != "" {
		gr.Resource += "/" + ri.subresource
	}
	return apierrors.NewMethodNotSupported(gr, ri.verb)
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	f, err := negotiate(r)
	if err != nil {
		return err
	}
	obj, err := s.get(r.Context(), ri.res, ri.namespace, ri.name)
	if err != nil {
		return err
	}
	if ri.subresource == "scale" {
		writeObject(w, http.StatusOK, plain(f), scaleOf(obj, ri.res))
		return nil
	}
	return s.writeOne(w, r, http.StatusOK, ri.res, f, obj)
}

// plain drops a conversion target: the reply is the object itself.
func plain(f outputFormat) outputFormat {
	if f.as != "" {
		info, _ := runtime.SerializerInfoForMediaType(registry.Codecs.SupportedMediaTypes(), mediaJSON)
		return outputFormat{info: info}
	}
	return f
}

// writeOne answers one object as asked: itself, a Table row or its metadata.
func (s *Server) writeOne(w http.ResponseWriter, r *http.Request, code int, res *registry.Resource, f outputFormat, obj runtime.Object) error {
	switch f.as {
	case "Table":
		opts := &metav1.TableOptions{}
		if err := decodeQuery(r, opts); err != nil {
			return err
		}
		t, err := s.table(res, []runtime.Object{obj}, opts.IncludeObject, false)
		if err != nil {
			return err
		}
		a, _ := meta.Accessor(obj)
		t.ResourceVersion = a.GetResourceVersion()
		writeObject(w, code, f, t)
	case "PartialObjectMetadata":
		writeObject(w, code, f, partialMetadata(obj))
	case "PartialObjectMetadataList":
		return apierrors.NewBadRequest("a single object cannot be returned as PartialObjectMetadataList")
	default:
		writeObject(w, code, f, obj)
	}
	return nil
}

// partialMetadata is the metadata-only form of an object.
func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if m, ok := u.Object["metadata"].(map[string]interface{}); ok {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &p.ObjectMeta)
		}
		return p
	}
	if oma, ok := obj.(metav1.ObjectMetaAccessor); ok {
		if om, ok := oma.GetObjectMeta().(*metav1.ObjectMeta); ok {
			p.ObjectMeta = *om.DeepCopy()
		}
	}
	return p
}
