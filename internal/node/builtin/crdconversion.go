package builtin

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// The versions of the custom resource upstream's conversion webhook
// tests convert between: v1 has hostPort, v2 host and port.
const (
	exampleV1 = "stable.example.com/v1"
	exampleV2 = "stable.example.com/v2"
)

// conversionSerializers are the JSON and the YAML serializers of
// ConversionReviews (apiextensions.k8s.io/v1 and v1beta1).
var conversionSerializers = sync.OnceValue(func() map[string]runtime.Serializer {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, apiextensionsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("conversion scheme: %v", err))
		}
	}
	return map[string]runtime.Serializer{
		"application/json": json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{}),
		"application/yaml": json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true}),
	}
})

// crdConversionWebhook is agnhost's crd-conversion-webhook, which
// upstream's CRD conversion tests register: /crdconvert over HTTPS on
// --port converts the objects of a ConversionReview between
// stable.example.com/v1 (hostPort: "host:port") and v2 (host, port).
func crdConversionWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("crd-conversion-webhook", flag.ContinueOnError)
	certFile := fs.String("tls-cert-file", "", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert.")
	keyFile := fs.String("tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file.")
	port := fs.Int("port", 443, "Secure port that the webhook listens on")
	verbosity := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("crd-conversion-webhook accepts at most 0 arg(s), received %d", fs.NArg())
	}
	mux := http.NewServeMux()
	mux.Handle("/crdconvert", conversionHandler(convertExample, *verbosity >= 2))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return serveTLS(ctx, *port, *certFile, *keyFile, mux)
}

// convertFunc converts one custom resource to the apiVersion to, or fails
// with a status that is not Success.
type convertFunc func(obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, metav1.Status)

func conversionFailed(format string, a ...any) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf(format, a...)}
}

// conversionHandler answers ConversionReviews (JSON or YAML, v1 or
// v1beta1) with convert's objects, as agnhost's converter does: 400 for
// a body it cannot read, a failed result for an object it cannot
// convert, the answer in the serialization the request Accepts.
func conversionHandler(convert convertFunc, verbose bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ct := r.Header.Get("Content-Type")
		in, ok := conversionSerializers()[ct]
		if !ok {
			msg := fmt.Sprintf("invalid Content-Type header `%s`", ct)
			slog.Error("agnhost crd-conversion-webhook: " + msg)
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		if verbose {
			slog.Info("agnhost crd-conversion-webhook: handling request", "body", string(body))
		}
		obj, gvk, err := in.Decode(body, nil, nil)
		if err != nil {
			slog.Error("agnhost crd-conversion-webhook: decode", "err", err)
			http.Error(w, fmt.Sprintf("failed to deserialize body (%v) with error %v", string(body), err), http.StatusBadRequest)
			return
		}
		switch review := obj.(type) {
		case *apiextensionsv1.ConversionReview:
			if review.Request == nil {
				panic(http.ErrAbortHandler) // agnhost crashes
			}
			resp := &apiextensionsv1.ConversionResponse{}
			resp.ConvertedObjects, resp.Result = convertObjects(review.Request.Objects, review.Request.DesiredAPIVersion, convert)
			resp.UID = review.Request.UID
			review.Response, review.Request = resp, &apiextensionsv1.ConversionRequest{}
		case *apiextensionsv1beta1.ConversionReview:
			if review.Request == nil {
				panic(http.ErrAbortHandler)
			}
			resp := &apiextensionsv1beta1.ConversionResponse{}
			resp.ConvertedObjects, resp.Result = convertObjects(review.Request.Objects, review.Request.DesiredAPIVersion, convert)
			resp.UID = review.Request.UID
			review.Response, review.Request = resp, &apiextensionsv1beta1.ConversionRequest{}
		default:
			msg := fmt.Sprintf("Unsupported group version kind: %v", gvk)
			slog.Error("agnhost crd-conversion-webhook: " + msg)
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		accept := r.Header.Get("Accept")
		out := conversionOutput(accept)
		if out == nil {
			msg := fmt.Sprintf("invalid accept header `%s`", accept)
			slog.Error("agnhost crd-conversion-webhook: " + msg)
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		var buf bytes.Buffer
		if err := out.Encode(obj, &buf); err != nil {
			slog.Error("agnhost crd-conversion-webhook: encode", "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if verbose {
			slog.Info("agnhost crd-conversion-webhook: sending response", "body", buf.String())
		}
		_, _ = w.Write(buf.Bytes())
	})
}

// convertObjects converts objects to the apiVersion to: all of them, or
// none with the failure of the first that fails.
func convertObjects(objects []runtime.RawExtension, to string, convert convertFunc) ([]runtime.RawExtension, metav1.Status) {
	var converted []runtime.RawExtension
	for _, raw := range objects {
		var cr unstructured.Unstructured
		if err := cr.UnmarshalJSON(raw.Raw); err != nil {
			slog.Error("agnhost crd-conversion-webhook: unmarshal object", "err", err)
			return nil, conversionFailed("failed to unmarshall object (%v) with error: %v", string(raw.Raw), err)
		}
		out, status := convert(&cr, to)
		if status.Status != metav1.StatusSuccess {
			slog.Error("agnhost crd-conversion-webhook: convert", "status", status.String())
			return nil, status
		}
		out.SetAPIVersion(to)
		converted = append(converted, runtime.RawExtension{Object: out})
	}
	return converted, metav1.Status{Status: metav1.StatusSuccess}
}

// convertExample converts the e2e tests' custom resource between
// stable.example.com/v1's hostPort and v2's host and port.
func convertExample(obj *unstructured.Unstructured, to string) (*unstructured.Unstructured, metav1.Status) {
	from := obj.GetAPIVersion()
	if from == to {
		return nil, conversionFailed("conversion from a version to itself should not call the webhook: %s", to)
	}
	out := obj.DeepCopy()
	switch {
	case from == exampleV1 && to == exampleV2:
		if hostPort, ok := out.Object["hostPort"]; ok {
			s, ok := hostPort.(string)
			if !ok {
				panic(http.ErrAbortHandler) // agnhost crashes
			}
			delete(out.Object, "hostPort")
			host, port, ok := strings.Cut(s, ":")
			if !ok || strings.Contains(port, ":") {
				return nil, conversionFailed("invalid hostPort value `%v`", hostPort)
			}
			out.Object["host"], out.Object["port"] = host, port
		}
	case from == exampleV2 && to == exampleV1:
		host, hasHost := out.Object["host"]
		port, hasPort := out.Object["port"]
		if hasHost || hasPort {
			if !hasHost {
				host = ""
			}
			if !hasPort {
				port = ""
			}
			out.Object["hostPort"] = fmt.Sprintf("%s:%s", host, port)
			delete(out.Object, "host")
			delete(out.Object, "port")
		}
	case from == exampleV1 || from == exampleV2:
		return nil, conversionFailed("unexpected conversion version %q", to)
	default:
		return nil, conversionFailed("unexpected conversion version %q", from)
	}
	return out, metav1.Status{Status: metav1.StatusSuccess}
}

// conversionOutput is the serializer of an answer to a request that
// Accepts accept (JSON when it says nothing or takes any), nil for none.
// The clauses count by their q, then their specificity, as goautoneg
// orders them.
func conversionOutput(accept string) runtime.Serializer {
	serializers := conversionSerializers()
	if accept == "" {
		return serializers["application/json"]
	}
	type clause struct {
		typ, subtype string
		q            float64
		params       int
	}
	var clauses []clause
	for part := range strings.SplitSeq(accept, ",") {
		mediaRange, params, _ := strings.Cut(strings.Trim(part, " "), ";")
		c := clause{q: 1}
		typ, subtype, hasSlash := strings.Cut(mediaRange, "/")
		c.typ = strings.Trim(typ, " ")
		switch {
		case !hasSlash && c.typ == "*":
			c.subtype = "*"
		case hasSlash && !strings.Contains(subtype, "/"):
			c.subtype = strings.Trim(subtype, " ")
		default:
			continue
		}
		if params != "" {
			for p := range strings.SplitSeq(params, ";") {
				k, v, ok := strings.Cut(p, "=")
				if !ok {
					continue
				}
				if strings.Trim(k, " ") == "q" {
					q, _ := strconv.ParseFloat(v, 32)
					c.q = q
				} else {
					c.params++
				}
			}
		}
		clauses = append(clauses, c)
	}
	rank := func(c clause) []float64 {
		return []float64{-c.q, boolRank(c.typ == "*"), boolRank(c.subtype == "*"), -float64(c.params)}
	}
	slices.SortStableFunc(clauses, func(a, b clause) int { return slices.Compare(rank(a), rank(b)) })
	for _, c := range clauses {
		switch {
		case c.typ == "application" && (c.subtype == "json" || c.subtype == "yaml"):
			return serializers[c.typ+"/"+c.subtype]
		case c.typ == "application" && c.subtype == "*", c.typ == "*" && c.subtype == "*":
			// agnhost takes either at random; JSON here.
			return serializers["application/json"]
		}
	}
	return nil
}

func boolRank(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
