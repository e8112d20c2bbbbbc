package builtin

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The JSON patches agnhost webhook answers with.
const (
	patchFirstLabel      = `[{"op":"add","path":"/metadata/labels","value":{"added-label":"yes"}}]`
	patchAdditionalLabel = `[{"op":"add","path":"/metadata/labels/added-label","value":"yes"}]`
	patchUpdateLabel     = `[{"op":"replace","path":"/metadata/labels/added-label","value":"yes"}]`
	patchMutationStage1  = `[{"op":"add","path":"/data/mutation-stage-1","value":"yes"}]`
	patchMutationStage2  = `[{"op":"add","path":"/data/mutation-stage-2","value":"yes"}]`
	patchInitContainer   = `[{"op":"add","path":"/spec/initContainers","value":[{"image":"webhook-added-image","name":"webhook-added-init-container","resources":{}}]}]`
	// patchSidecarFormat takes the --sidecar-image, as it is.
	patchSidecarFormat = `[{"op":"add","path":"/spec/containers/-","value":{"image":"%s","name":"webhook-added-sidecar","resources":{}}}]`
)

// alwaysAllowDelay is how long /always-allow-delay-5s thinks.
var alwaysAllowDelay = 5 * time.Second

// The resources agnhost webhook's paths expect.
var (
	podsResource       = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMapsResource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	crdV1beta1Resource = metav1.GroupVersionResource{Group: apiextensionsv1beta1.GroupName, Version: "v1beta1", Resource: "customresourcedefinitions"}
	crdV1Resource      = metav1.GroupVersionResource{Group: apiextensionsv1.GroupName, Version: "v1", Resource: "customresourcedefinitions"}
)

// admissionDecoder decodes AdmissionReviews, and the objects in them, as
// agnhost webhook does: by their apiVersion and kind, with the core and
// admission kinds known.
var admissionDecoder = sync.OnceValue(func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		admissionv1.AddToScheme,
		admissionv1beta1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		admissionregistrationv1beta1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("admission scheme: %v", err))
		}
	}
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
})

// admitFunc decides one admission request. A nil response is agnhost's
// crash for a request it did not expect: the connection is dropped.
type admitFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// webhook is agnhost's webhook, which upstream's admission webhook tests
// register: validating and mutating admission webhooks over HTTPS on
// --port, one for each path, each answering admission.k8s.io/v1 and
// v1beta1 AdmissionReviews with agnhost's decisions, messages and
// patches.
func webhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	certFile := fs.String("tls-cert-file", "", "File containing the default x509 Certificate for HTTPS. (CA cert, if any, concatenated after server cert).")
	keyFile := fs.String("tls-private-key-file", "", "File containing the default x509 private key matching --tls-cert-file.")
	port := fs.Int("port", 443, "Secure port that the webhook listens on")
	sidecarImage := fs.String("sidecar-image", "", "Image to be used as the injected sidecar")
	verbosity := logFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("webhook accepts at most 0 arg(s), received %d", fs.NArg())
	}
	verbose := *verbosity >= 2
	mux := http.NewServeMux()
	for path, admit := range map[string]admitFunc{
		"/always-allow-delay-5s":    alwaysAllowDelayed,
		"/always-deny":              alwaysDeny,
		"/add-label":                addLabel,
		"/pods":                     admitPods,
		"/pods/attach":              denyAttach,
		"/mutating-pods":            mutatePods,
		"/mutating-pods-sidecar":    mutatePodsSidecar(*sidecarImage),
		"/configmaps":               admitConfigMaps,
		"/mutating-configmaps":      mutateConfigMaps,
		"/custom-resource":          admitCustomResource,
		"/mutating-custom-resource": mutateCustomResource,
		"/crd":                      admitCRD,
	} {
		mux.Handle(path, admissionHandler(admit, verbose))
	}
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return serveTLS(ctx, *port, *certFile, *keyFile, mux)
}

// logFlags takes the logging flags agnhost accepts (klog's -v and
// -vmodule, --log-flush-frequency), which upstream's tests pass its
// webhooks, and returns -v.
func logFlags(fs *flag.FlagSet) *int {
	v := fs.Int("v", 0, "number for the log level verbosity")
	fs.String("vmodule", "", "comma-separated list of pattern=N settings for file-filtered logging (ignored)")
	for _, name := range []string{"log-flush-frequency", "log_flush_frequency"} {
		fs.Duration(name, 5*time.Second, "Maximum number of seconds between log flushes (ignored)")
	}
	return v
}

// admissionHandler answers AdmissionReviews posted to it with admit's
// response, as agnhost's webhook does: nothing for a body that is not
// application/json, 400 for one that is no AdmissionReview.
func admissionHandler(admit admitFunc, verbose bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			slog.Error("agnhost webhook: unexpected content type", "contentType", ct, "want", "application/json")
			return
		}
		if verbose {
			slog.Info("agnhost webhook: handling request", "path", r.URL.Path, "body", string(body))
		}
		obj, gvk, err := admissionDecoder().Decode(body, nil, nil)
		if err != nil {
			msg := fmt.Sprintf("Request could not be decoded: %v", err)
			slog.Error("agnhost webhook: " + msg)
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		var out runtime.Object
		switch review := obj.(type) {
		case *admissionv1.AdmissionReview:
			resp := admitOrAbort(r.Context(), admit, review.Request)
			resp.UID = review.Request.UID
			reply := &admissionv1.AdmissionReview{Response: resp}
			reply.SetGroupVersionKind(*gvk)
			out = reply
		case *admissionv1beta1.AdmissionReview:
			if review.Request == nil {
				panic(http.ErrAbortHandler)
			}
			var req admissionv1.AdmissionRequest
			if err := convertJSON(review.Request, &req); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			var resp admissionv1beta1.AdmissionResponse
			if err := convertJSON(admitOrAbort(r.Context(), admit, &req), &resp); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			resp.UID = review.Request.UID
			reply := &admissionv1beta1.AdmissionReview{Response: &resp}
			reply.SetGroupVersionKind(*gvk)
			out = reply
		default:
			msg := fmt.Sprintf("Unsupported group version kind: %v", gvk)
			slog.Error("agnhost webhook: " + msg)
			http.Error(w, msg, http.StatusBadRequest)
			return
		}
		b, err := json.Marshal(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if verbose {
			slog.Info("agnhost webhook: sending response", "path", r.URL.Path, "body", string(b))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

// admitOrAbort is admit's response to req, or, where agnhost's webhook
// crashes (no request, or a nil response), the end of the connection
// without an answer.
func admitOrAbort(ctx context.Context, admit admitFunc, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req == nil {
		panic(http.ErrAbortHandler)
	}
	resp := admit(ctx, req)
	if resp == nil {
		panic(http.ErrAbortHandler)
	}
	return resp
}

// convertJSON copies in to out, of another version of the same type.
func convertJSON(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("convert %T: %w", in, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("convert %T to %T: %w", in, out, err)
	}
	return nil
}

// denied is the response that fails a request with err.
func denied(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
}

// jsonPatch is an allowing response that applies patch, none when empty.
func jsonPatch(patch string) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if patch != "" {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = []byte(patch), &pt
	}
	return resp
}

// decodeObject decodes raw into obj as the webhook's scheme does.
func decodeObject(raw []byte, obj runtime.Object) error {
	_, _, err := admissionDecoder().Decode(raw, nil, obj)
	return err
}

// objectOf is the object a request is about: the old one of a DELETE.
func objectOf(req *admissionv1.AdmissionRequest) []byte {
	if req.Operation == admissionv1.Delete {
		return req.OldObject.Raw
	}
	return req.Object.Raw
}

// alwaysAllowDelayed (/always-allow-delay-5s) allows everything, after
// five seconds.
func alwaysAllowDelayed(ctx context.Context, _ *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	select {
	case <-time.After(alwaysAllowDelay):
	case <-ctx.Done():
		return nil
	}
	return &admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Message: "this webhook allows all requests"}}
}

// alwaysDeny (/always-deny) denies everything.
func alwaysDeny(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "this webhook denies all requests"}}
}

// addLabel (/add-label) patches any object to have the label
// added-label=yes.
func addLabel(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var obj struct {
		metav1.ObjectMeta `json:"metadata,omitempty"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return denied(err)
	}
	value, has := obj.Labels["added-label"]
	switch {
	case len(obj.Labels) == 0:
		return jsonPatch(patchFirstLabel)
	case !has:
		return jsonPatch(patchAdditionalLabel)
	case value != "yes":
		return jsonPatch(patchUpdateLabel)
	}
	return jsonPatch("")
}

// admitPods (/pods) denies a pod labelled webhook-e2e-test:
// webhook-disallow or with a container whose name has webhook-disallow
// in it, and never answers for one labelled webhook-e2e-test:
// wait-forever.
func admitPods(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != podsResource {
		return denied(fmt.Errorf("expect resource to be %s", podsResource))
	}
	var pod corev1.Pod
	if err := decodeObject(req.Object.Raw, &pod); err != nil {
		return denied(err)
	}
	var reasons []string
	switch pod.Labels["webhook-e2e-test"] {
	case "webhook-disallow":
		reasons = append(reasons, "the pod contains unwanted label;")
	case "wait-forever":
		// agnhost's handler blocks for good; this one until the caller
		// gives up or the server stops.
		<-ctx.Done()
		return nil
	}
	for _, c := range pod.Spec.Containers {
		if strings.Contains(c.Name, "webhook-disallow") {
			reasons = append(reasons, "the pod contains unwanted container name;")
		}
	}
	if len(reasons) == 0 {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: strings.Join(reasons, " ")}}
}

// denyAttach (/pods/attach) denies attaching to container1 of the pod
// to-be-attached-pod with stdin.
func denyAttach(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Name != "to-be-attached-pod" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	if req.Resource != podsResource {
		return denied(fmt.Errorf("expect resource to be %s, got %s", podsResource, req.Resource))
	}
	if req.SubResource != "attach" {
		return denied(fmt.Errorf("expect subresource to be attach, got %s", req.SubResource))
	}
	var opts corev1.PodAttachOptions
	if err := decodeObject(req.Object.Raw, &opts); err != nil {
		return denied(err)
	}
	if !opts.Stdin || opts.Container != "container1" {
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "attaching to pod 'to-be-attached-pod' is not allowed"}}
}

// mutatePods (/mutating-pods) adds the init container
// webhook-added-init-container to the pod webhook-to-be-mutated.
func mutatePods(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return patchPod(req, patchInitContainer, func(pod *corev1.Pod) bool {
		return pod.Name == "webhook-to-be-mutated" && !hasContainer(pod.Spec.InitContainers, "webhook-added-init-container")
	})
}

// mutatePodsSidecar (/mutating-pods-sidecar) adds the container
// webhook-added-sidecar of image to every pod; it fails every request
// when no --sidecar-image was given.
func mutatePodsSidecar(image string) admitFunc {
	return func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if image == "" {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{
				Status:  metav1.StatusFailure,
				Message: "No image specified by the sidecar-image parameter",
				Code:    http.StatusInternalServerError,
			}}
		}
		return patchPod(req, fmt.Sprintf(patchSidecarFormat, image), func(pod *corev1.Pod) bool {
			return !hasContainer(pod.Spec.Containers, "webhook-added-sidecar")
		})
	}
}

// patchPod allows a pod, with patch where want says so.
func patchPod(req *admissionv1.AdmissionRequest, patch string, want func(*corev1.Pod) bool) *admissionv1.AdmissionResponse {
	if req.Resource != podsResource {
		slog.Error("agnhost webhook: unexpected resource", "resource", req.Resource, "want", podsResource)
		return nil
	}
	var pod corev1.Pod
	if err := decodeObject(req.Object.Raw, &pod); err != nil {
		return denied(err)
	}
	if !want(&pod) {
		patch = ""
	}
	return jsonPatch(patch)
}

func hasContainer(containers []corev1.Container, name string) bool {
	for _, c := range containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// admitConfigMaps (/configmaps) denies creating or updating a configmap
// with the data webhook-e2e-test: webhook-disallow, and deleting one with
// webhook-e2e-test: webhook-nondeletable.
func admitConfigMaps(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != configMapsResource {
		slog.Error("agnhost webhook: unexpected resource", "resource", req.Resource, "want", configMapsResource)
		return nil
	}
	var cm corev1.ConfigMap
	if err := decodeObject(objectOf(req), &cm); err != nil {
		return denied(err)
	}
	return admitData(req.Operation, cm.Data, "the configmap contains unwanted key and value",
		"the configmap cannot be deleted because it contains unwanted key and value")
}

// admitData denies, with reason, creating or updating an object whose
// data has webhook-e2e-test: webhook-disallow, and deleting one with
// webhook-e2e-test: webhook-nondeletable.
func admitData(op admissionv1.Operation, data map[string]string, reason, deleteReason string) *admissionv1.AdmissionResponse {
	v, ok := data["webhook-e2e-test"]
	switch {
	case ok && v == "webhook-disallow" && (op == admissionv1.Create || op == admissionv1.Update):
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Reason: metav1.StatusReason(reason)}}
	case ok && v == "webhook-nondeletable" && op == admissionv1.Delete:
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Reason: metav1.StatusReason(deleteReason)}}
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// mutateConfigMaps (/mutating-configmaps) adds mutation-stage-1: yes to a
// configmap with mutation-start: yes, and mutation-stage-2: yes to one
// with mutation-stage-1: yes.
func mutateConfigMaps(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Resource != configMapsResource {
		slog.Error("agnhost webhook: unexpected resource", "resource", req.Resource, "want", configMapsResource)
		return nil
	}
	var cm corev1.ConfigMap
	if err := decodeObject(req.Object.Raw, &cm); err != nil {
		return denied(err)
	}
	return jsonPatch(mutationStage(cm.Data))
}

// mutationStage is the patch of the next mutation stage of data.
func mutationStage(data map[string]string) string {
	switch {
	case data["mutation-stage-1"] == "yes":
		return patchMutationStage2
	case data["mutation-start"] == "yes":
		return patchMutationStage1
	}
	return ""
}

// customResource is what the custom resource paths read of an object:
// its data.
type customResource struct {
	metav1.ObjectMeta
	Data map[string]string
}

// admitCustomResource (/custom-resource) denies as /configmaps does, by a
// custom resource's data.
func admitCustomResource(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var cr customResource
	if err := json.Unmarshal(objectOf(req), &cr); err != nil {
		return denied(err)
	}
	return admitData(req.Operation, cr.Data, "the custom resource contains unwanted data",
		"the custom resource cannot be deleted because it contains unwanted key and value")
}

// mutateCustomResource (/mutating-custom-resource) patches a custom
// resource's data as /mutating-configmaps does.
func mutateCustomResource(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var cr customResource
	if err := json.Unmarshal(req.Object.Raw, &cr); err != nil {
		return denied(err)
	}
	return jsonPatch(mutationStage(cr.Data))
}

// admitCRD (/crd) denies a CustomResourceDefinition labelled
// webhook-e2e-test: webhook-disallow.
func admitCRD(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var labels map[string]string
	switch req.Resource {
	case crdV1beta1Resource:
		var crd apiextensionsv1beta1.CustomResourceDefinition
		if err := decodeObject(req.Object.Raw, &crd); err != nil {
			return denied(err)
		}
		labels = crd.Labels
	case crdV1Resource:
		var crd apiextensionsv1.CustomResourceDefinition
		if err := decodeObject(req.Object.Raw, &crd); err != nil {
			return denied(err)
		}
		labels = crd.Labels
	default:
		return denied(fmt.Errorf("expect resource to be one of [%v, %v] but got %v", crdV1beta1Resource, crdV1Resource, req.Resource))
	}
	if labels["webhook-e2e-test"] == "webhook-disallow" {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the crd contains unwanted label"}}
	}
	return &admissionv1.AdmissionResponse{Allowed: true}
}
