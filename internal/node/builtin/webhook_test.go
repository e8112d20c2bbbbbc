package builtin

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// startTLSAgnhost runs agnhost subcommand on a free port with a
// certificate for localhost, as upstream's tests mount theirs, and
// returns its address and a client that trusts it.
func startTLSAgnhost(t *testing.T, subcommand string, args ...string) (string, *http.Client) {
	t.Helper()
	cert, key, err := LocalhostCertificate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, "tcp")
	startAgnhost(t, append([]string{subcommand, "--tls-cert-file=" + certFile, "--tls-private-key-file=" + keyFile, "-v=4", fmt.Sprintf("--port=%d", port)}, args...)...)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(client.CloseIdleConnections)
	return fmt.Sprintf("https://localhost:%d", port), client
}

// post sends body to url as contentType and returns the status and the
// answer.
func post(t *testing.T, client *http.Client, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := client.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

var (
	podsGVR       = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMapsGVR = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	crdsGVR       = metav1.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crGVR         = metav1.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "e2e-test-webhook-crds"}
)

// admissionRequest is a request of op on resource, with the object obj
// (the old object of a DELETE).
func admissionRequest(op admissionv1.Operation, resource metav1.GroupVersionResource, obj string) *admissionv1.AdmissionRequest {
	req := &admissionv1.AdmissionRequest{UID: "uid-1", Operation: op, Resource: resource}
	if op == admissionv1.Delete {
		req.OldObject = runtime.RawExtension{Raw: []byte(obj)}
	} else {
		req.Object = runtime.RawExtension{Raw: []byte(obj)}
	}
	return req
}

// agnhost webhook answers each of its paths as agnhost's does, with the
// decisions, messages and patches upstream's admission webhook tests
// look for.
func TestAgnhostWebhook(t *testing.T) {
	delay := alwaysAllowDelay
	alwaysAllowDelay = 10 * time.Millisecond
	t.Cleanup(func() { alwaysAllowDelay = delay })
	base, client := startTLSAgnhost(t, "webhook")

	const (
		pod            = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}`
		disallowedPod  = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"},{"name":"x-webhook-disallow"}]}}`
		disallowedBoth = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"webhook-e2e-test":"webhook-disallow"}},"spec":{"containers":[{"name":"webhook-disallow"}]}}`
		mutatedPod     = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"webhook-to-be-mutated"},"spec":{"containers":[{"name":"c"}]}}`
		attach         = `{"apiVersion":"v1","kind":"PodAttachOptions","stdin":true,"container":"container1"}`
		cmDisallow     = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"webhook-e2e-test":"webhook-disallow"}}`
		cmNondeletable = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"webhook-e2e-test":"webhook-nondeletable"}}`
		cmStart        = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"mutation-start":"yes"}}`
		cmStage1       = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"mutation-start":"yes","mutation-stage-1":"yes"}}`
		crDisallow     = `{"apiVersion":"stable.example.com/v1","kind":"E2eTestWebhookCrd","metadata":{"name":"cr"},"data":{"webhook-e2e-test":"webhook-disallow"}}`
		crStart        = `{"apiVersion":"stable.example.com/v1","kind":"E2eTestWebhookCrd","metadata":{"name":"cr"},"data":{"mutation-start":"yes"}}`
		crdDisallow    = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crd","labels":{"webhook-e2e-test":"webhook-disallow"}},"spec":{"group":"g","names":{"plural":"ps","kind":"P"},"scope":"Namespaced","versions":[]}}`
		crdAllowed     = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"crd"}}`
	)
	// Upstream's patches, as agnhost writes them.
	const (
		stage1Patch = `[{ "op": "add", "path": "/data/mutation-stage-1", "value": "yes" }]`
		stage2Patch = `[{ "op": "add", "path": "/data/mutation-stage-2", "value": "yes" }]`
	)
	attachReq := admissionRequest(admissionv1.Connect, podsGVR, attach)
	attachReq.Name, attachReq.SubResource = "to-be-attached-pod", "attach"
	otherAttachReq := *attachReq
	otherAttachReq.Name = "another-pod"

	for _, c := range []struct {
		name, path  string
		req         *admissionv1.AdmissionRequest
		allowed     bool
		message     string
		reason      string
		code        int32
		patch       string
		v1beta1     bool
		wantNoPatch bool
	}{
		{name: "always-deny", path: "/always-deny", req: admissionRequest(admissionv1.Create, podsGVR, pod),
			message: "this webhook denies all requests"},
		{name: "always-deny v1beta1", path: "/always-deny", req: admissionRequest(admissionv1.Create, podsGVR, pod), v1beta1: true,
			message: "this webhook denies all requests"},
		{name: "always-allow", path: "/always-allow-delay-5s", req: admissionRequest(admissionv1.Create, podsGVR, pod),
			allowed: true, message: "this webhook allows all requests"},
		{name: "pod allowed", path: "/pods", req: admissionRequest(admissionv1.Create, podsGVR, pod), allowed: true},
		{name: "pod container", path: "/pods", req: admissionRequest(admissionv1.Create, podsGVR, disallowedPod),
			message: "the pod contains unwanted container name;"},
		{name: "pod label and container", path: "/pods", req: admissionRequest(admissionv1.Update, podsGVR, disallowedBoth), v1beta1: true,
			message: "the pod contains unwanted label; the pod contains unwanted container name;"},
		{name: "pods, not a pod", path: "/pods", req: admissionRequest(admissionv1.Create, configMapsGVR, cmStart),
			message: "expect resource to be { v1 pods}"},
		{name: "attach denied", path: "/pods/attach", req: attachReq,
			message: "attaching to pod 'to-be-attached-pod' is not allowed"},
		{name: "attach another pod", path: "/pods/attach", req: &otherAttachReq, allowed: true},
		{name: "mutating pod", path: "/mutating-pods", req: admissionRequest(admissionv1.Create, podsGVR, mutatedPod), allowed: true,
			patch: `[{"op":"add","path":"/spec/initContainers","value":[{"image":"webhook-added-image","name":"webhook-added-init-container","resources":{}}]}]`},
		{name: "mutating another pod", path: "/mutating-pods", req: admissionRequest(admissionv1.Create, podsGVR, pod), allowed: true, wantNoPatch: true},
		{name: "sidecar without image", path: "/mutating-pods-sidecar", req: admissionRequest(admissionv1.Create, podsGVR, pod),
			message: "No image specified by the sidecar-image parameter", code: 500},
		{name: "configmap disallowed", path: "/configmaps", req: admissionRequest(admissionv1.Create, configMapsGVR, cmDisallow),
			reason: "the configmap contains unwanted key and value"},
		{name: "configmap nondeletable", path: "/configmaps", req: admissionRequest(admissionv1.Delete, configMapsGVR, cmNondeletable),
			reason: "the configmap cannot be deleted because it contains unwanted key and value"},
		{name: "configmap deletable", path: "/configmaps", req: admissionRequest(admissionv1.Delete, configMapsGVR, cmDisallow), allowed: true},
		{name: "configmap stage 1", path: "/mutating-configmaps", req: admissionRequest(admissionv1.Create, configMapsGVR, cmStart),
			allowed: true, patch: stage1Patch},
		{name: "configmap stage 2", path: "/mutating-configmaps", req: admissionRequest(admissionv1.Create, configMapsGVR, cmStage1),
			allowed: true, patch: stage2Patch},
		{name: "configmap no stage", path: "/mutating-configmaps", req: admissionRequest(admissionv1.Create, configMapsGVR, cmDisallow),
			allowed: true, wantNoPatch: true},
		{name: "add first label", path: "/add-label", req: admissionRequest(admissionv1.Create, configMapsGVR, `{"metadata":{"name":"x"}}`),
			allowed: true, patch: `[{ "op": "add", "path": "/metadata/labels", "value": {"added-label": "yes"}}]`},
		{name: "add another label", path: "/add-label", req: admissionRequest(admissionv1.Create, configMapsGVR, `{"metadata":{"labels":{"a":"b"}}}`),
			allowed: true, patch: `[{ "op": "add", "path": "/metadata/labels/added-label", "value": "yes" }]`},
		{name: "update label", path: "/add-label", req: admissionRequest(admissionv1.Update, configMapsGVR, `{"metadata":{"labels":{"added-label":"no"}}}`),
			allowed: true, patch: `[{ "op": "replace", "path": "/metadata/labels/added-label", "value": "yes" }]`},
		{name: "label already", path: "/add-label", req: admissionRequest(admissionv1.Update, configMapsGVR, `{"metadata":{"labels":{"added-label":"yes"}}}`),
			allowed: true, wantNoPatch: true},
		{name: "custom resource disallowed", path: "/custom-resource", req: admissionRequest(admissionv1.Update, crGVR, crDisallow),
			reason: "the custom resource contains unwanted data"},
		{name: "custom resource mutated", path: "/mutating-custom-resource", req: admissionRequest(admissionv1.Create, crGVR, crStart),
			allowed: true, patch: stage1Patch},
		{name: "crd disallowed", path: "/crd", req: admissionRequest(admissionv1.Create, crdsGVR, crdDisallow),
			message: "the crd contains unwanted label"},
		{name: "crd allowed", path: "/crd", req: admissionRequest(admissionv1.Create, crdsGVR, crdAllowed), allowed: true},
		{name: "crd, not a crd", path: "/crd", req: admissionRequest(admissionv1.Create, podsGVR, pod),
			message: "expect resource to be one of [{apiextensions.k8s.io v1beta1 customresourcedefinitions}, {apiextensions.k8s.io v1 customresourcedefinitions}] but got { v1 pods}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			apiVersion := "admission.k8s.io/v1"
			if c.v1beta1 {
				apiVersion = "admission.k8s.io/v1beta1"
			}
			review := &admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Request: c.req}
			body, err := json.Marshal(review)
			if err != nil {
				t.Fatal(err)
			}
			code, answer := post(t, client, base+c.path, "application/json", body)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, answer)
			}
			var got admissionv1.AdmissionReview
			if err := json.Unmarshal(answer, &got); err != nil {
				t.Fatalf("%s: %v", answer, err)
			}
			if got.APIVersion != apiVersion || got.Kind != "AdmissionReview" || got.Request != nil || got.Response == nil {
				t.Fatalf("answer %s", answer)
			}
			r := got.Response
			if r.UID != "uid-1" || r.Allowed != c.allowed {
				t.Errorf("uid %q allowed %v, want uid-1 %v: %s", r.UID, r.Allowed, c.allowed, answer)
			}
			var message, reason string
			var statusCode int32
			if r.Result != nil {
				message, reason, statusCode = r.Result.Message, string(r.Result.Reason), r.Result.Code
			}
			if message != c.message || reason != c.reason || statusCode != c.code {
				t.Errorf("message %q reason %q code %d, want %q %q %d", message, reason, statusCode, c.message, c.reason, c.code)
			}
			switch {
			case c.patch != "":
				if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch || !sameJSON(r.Patch, []byte(c.patch)) {
					t.Errorf("patch %s (%v), want %s", r.Patch, r.PatchType, c.patch)
				}
			case c.wantNoPatch || len(r.Patch) > 0:
				if len(r.Patch) > 0 || r.PatchType != nil {
					t.Errorf("patch %s, want none", r.Patch)
				}
			}
		})
	}

	// What is no AdmissionReview: nothing for another content type, 400
	// for what does not decode or is of another kind.
	if code, answer := post(t, client, base+"/always-deny", "text/plain", []byte("{}")); code != http.StatusOK || len(answer) != 0 {
		t.Errorf("text/plain: %d %q, want 200 and nothing", code, answer)
	}
	if code, answer := post(t, client, base+"/always-deny", "application/json", []byte("{")); code != http.StatusBadRequest || !strings.HasPrefix(string(answer), "Request could not be decoded: ") {
		t.Errorf("bad JSON: %d %q", code, answer)
	}
	if code, answer := post(t, client, base+"/always-deny", "application/json", []byte(pod)); code != http.StatusBadRequest || string(answer) != "Unsupported group version kind: /v1, Kind=Pod\n" {
		t.Errorf("a pod: %d %q", code, answer)
	}
	// Where agnhost's webhook crashes (a configmap path asked about a
	// pod), the connection ends without an answer.
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  admissionRequest(admissionv1.Create, podsGVR, pod),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Post(base+"/configmaps", "application/json", bytes.NewReader(body)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Errorf("/configmaps asked about a pod answered %d %s", resp.StatusCode, b)
	}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("/readyz: %d %q", resp.StatusCode, b)
	}
}

// agnhost webhook --sidecar-image adds its sidecar to pods that have none,
// and a pod labelled wait-forever gets no answer.
func TestAgnhostWebhookSidecarAndWaitForever(t *testing.T) {
	base, client := startTLSAgnhost(t, "webhook", "--sidecar-image=registry.k8s.io/e2e-test-images/busybox:1.37.0-1")
	review := func(obj string) []byte {
		b, err := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  admissionRequest(admissionv1.Create, podsGVR, obj),
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	code, answer := post(t, client, base+"/mutating-pods-sidecar", "application/json",
		review(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`))
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &got); err != nil || code != http.StatusOK || got.Response == nil {
		t.Fatalf("%d %s (%v)", code, answer, err)
	}
	want := `[{"op":"add", "path":"/spec/containers/-","value":{"image":"registry.k8s.io/e2e-test-images/busybox:1.37.0-1","name":"webhook-added-sidecar","resources":{}}}]`
	if !got.Response.Allowed || !sameJSON(got.Response.Patch, []byte(want)) {
		t.Errorf("sidecar: %s", answer)
	}

	waiting := *client
	waiting.Timeout = 300 * time.Millisecond
	resp, err := waiting.Post(base+"/pods", "application/json", bytes.NewReader(review(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"webhook-e2e-test":"wait-forever"}}}`)))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Errorf("wait-forever answered %d %s", resp.StatusCode, b)
	}
}
