package apiserver

import (
	"bytes"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/internal/registry"
)

// Media types the server speaks.
const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// outputFormat is what the client asked for in Accept: a media type and the
// optional conversion target (as=Table, as=PartialObjectMetadata[List]).
type outputFormat struct {
	info runtime.SerializerInfo
	as   string // "", "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
}

// negotiate picks the first acceptable entry of the Accept header. Tables
// and metadata-only conversions are JSON only (they have no protobuf form
// here), so entries asking them in protobuf are skipped.
func negotiate(r *http.Request) (outputFormat, error) { return negotiateFor(r, true) }

// negotiateFor is negotiate for an endpoint that answers with tables or
// not: upstream's reviews, bindings, evictions and token requests have no
// table convertor, so an entry asking a Table of them is skipped (406 when
// no other is left).
func negotiateFor(r *http.Request, tables bool) (outputFormat, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = mediaJSON
	}
	for _, entry := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil {
			continue
		}
		as := params["as"]
		if as != "" {
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
			default:
				continue
			}
			if as == "Table" && !tables {
				continue
			}
			if mt != mediaJSON && mt != "*/*" && mt != "application/*" {
				continue
			}
		}
		switch mt {
		case "*/*", "application/*":
			mt = mediaJSON
		}
		info, ok := runtime.SerializerInfoForMediaType(registry.Codecs.SupportedMediaTypes(), mt)
		if !ok {
			continue
		}
		return outputFormat{info: info, as: as}, nil
	}
	return outputFormat{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", fmt.Sprintf("only the following media types are accepted: %s", strings.Join(supportedTypes(), ", ")), 0, false)
}

func supportedTypes() []string {
	var out []string
	for _, i := range registry.Codecs.SupportedMediaTypes() {
		out = append(out, i.MediaType)
	}
	return out
}

// writeObject encodes obj with the negotiated serializer.
func writeObject(w http.ResponseWriter, status int, f outputFormat, obj runtime.Object) {
	registry.SetKind(obj)
	var buf bytes.Buffer
	if err := f.info.Serializer.Encode(obj, &buf); err != nil {
		slog.Error("encode response", "err", err)
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	ct := f.info.MediaType
	if ct == mediaJSON || ct == mediaYAML {
		ct += ";charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeJSON encodes obj as JSON whatever the client asked.
func writeJSON(w http.ResponseWriter, status int, obj runtime.Object) {
	info, _ := runtime.SerializerInfoForMediaType(registry.Codecs.SupportedMediaTypes(), mediaJSON)
	writeObject(w, status, outputFormat{info: info}, obj)
}

// writeError answers err as a metav1.Status with its code.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	if st.Code >= 500 {
		slog.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	st.Kind, st.APIVersion = "Status", "v1"
	f, nerr := negotiate(r)
	if nerr != nil || f.as != "" {
		writeJSON(w, int(st.Code), st)
		return
	}
	writeObject(w, int(st.Code), f, st)
}

func statusOf(err error) *metav1.Status {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return &st
	}
	return &apierrors.NewInternalError(err).ErrStatus
}
