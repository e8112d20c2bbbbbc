package builtin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// agnhost crd-conversion-webhook converts upstream's test custom
// resource between v1's hostPort and v2's host and port, and fails as
// agnhost's converter does.
func TestAgnhostCRDConversionWebhook(t *testing.T) {
	base, client := startTLSAgnhost(t, "crd-conversion-webhook")
	convert := func(apiVersion, accept, to string, objects ...string) (int, []byte) {
		t.Helper()
		req := &apiextensionsv1.ConversionRequest{UID: "uid-2", DesiredAPIVersion: to}
		for _, o := range objects {
			req.Objects = append(req.Objects, runtime.RawExtension{Raw: []byte(o)})
		}
		body, err := json.Marshal(&apiextensionsv1.ConversionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "ConversionReview"},
			Request:  req,
		})
		if err != nil {
			t.Fatal(err)
		}
		r, err := http.NewRequest(http.MethodPost, base+"/crdconvert", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	review := func(apiVersion, accept, to string, objects ...string) *apiextensionsv1.ConversionResponse {
		t.Helper()
		code, answer := convert(apiVersion, accept, to, objects...)
		var got apiextensionsv1.ConversionReview
		if err := json.Unmarshal(answer, &got); err != nil || code != http.StatusOK {
			t.Fatalf("%d %s (%v)", code, answer, err)
		}
		if got.APIVersion != apiVersion || got.Kind != "ConversionReview" || got.Response == nil || got.Response.UID != "uid-2" {
			t.Fatalf("answer %s", answer)
		}
		if got.Request == nil || got.Request.UID != "" || len(got.Request.Objects) != 0 {
			t.Errorf("the request is not emptied, as agnhost does: %s", answer)
		}
		return got.Response
	}
	const (
		v1Object = `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd-webhook-1234-crd","metadata":{"name":"cr-instance-v1","namespace":"ns"},"hostPort":"localhost:8080"}`
		v2Object = `{"apiVersion":"stable.example.com/v2","kind":"E2e-test-crd-webhook-1234-crd","metadata":{"name":"cr-instance-v2","namespace":"ns"},"host":"localhost","port":"8080"}`
	)

	// v1 to v2 and back, in both versions of the review.
	for _, apiVersion := range []string{"apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"} {
		resp := review(apiVersion, "application/json, */*", "stable.example.com/v2", v1Object, `{"apiVersion":"stable.example.com/v1","kind":"K","metadata":{"name":"no-host-port"}}`)
		if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 {
			t.Fatalf("%s v1 to v2: %+v", apiVersion, resp)
		}
		want := `{"apiVersion":"stable.example.com/v2","kind":"E2e-test-crd-webhook-1234-crd","metadata":{"name":"cr-instance-v1","namespace":"ns"},"host":"localhost","port":"8080"}`
		if !sameJSON(resp.ConvertedObjects[0].Raw, []byte(want)) {
			t.Errorf("%s v1 to v2: %s, want %s", apiVersion, resp.ConvertedObjects[0].Raw, want)
		}
		if want := `{"apiVersion":"stable.example.com/v2","kind":"K","metadata":{"name":"no-host-port"}}`; !sameJSON(resp.ConvertedObjects[1].Raw, []byte(want)) {
			t.Errorf("%s v1 to v2 without hostPort: %s", apiVersion, resp.ConvertedObjects[1].Raw)
		}
		resp = review(apiVersion, "", "stable.example.com/v1", v2Object)
		want = `{"apiVersion":"stable.example.com/v1","kind":"E2e-test-crd-webhook-1234-crd","metadata":{"name":"cr-instance-v2","namespace":"ns"},"hostPort":"localhost:8080"}`
		if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 || !sameJSON(resp.ConvertedObjects[0].Raw, []byte(want)) {
			t.Errorf("%s v2 to v1: %+v", apiVersion, resp)
		}
	}

	// A v2 object with only its host gets hostPort "host:".
	resp := review("apiextensions.k8s.io/v1", "", "stable.example.com/v1", `{"apiVersion":"stable.example.com/v2","kind":"K","metadata":{"name":"x"},"host":"h"}`)
	if len(resp.ConvertedObjects) != 1 || !sameJSON(resp.ConvertedObjects[0].Raw, []byte(`{"apiVersion":"stable.example.com/v1","kind":"K","metadata":{"name":"x"},"hostPort":"h:"}`)) {
		t.Errorf("host only: %+v", resp)
	}

	// Failures: the result's message, no objects.
	for _, c := range []struct {
		to, object, message string
	}{
		{"stable.example.com/v1", v1Object, "conversion from a version to itself should not call the webhook: stable.example.com/v1"},
		{"stable.example.com/v3", v1Object, `unexpected conversion version "stable.example.com/v3"`},
		{"stable.example.com/v2", `{"apiVersion":"stable.example.com/v3","kind":"K","metadata":{"name":"x"}}`, `unexpected conversion version "stable.example.com/v3"`},
		{"stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","kind":"K","metadata":{"name":"x"},"hostPort":"a:b:c"}`, "invalid hostPort value `a:b:c`"},
		{"stable.example.com/v2", `{"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}`, `failed to unmarshall object ({"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}) with error: Object 'Kind' is missing in '{"apiVersion":"stable.example.com/v1","metadata":{"name":"x"}}'`},
	} {
		resp := review("apiextensions.k8s.io/v1", "", c.to, c.object)
		if resp.Result.Status != metav1.StatusFailure || resp.Result.Message != c.message || resp.ConvertedObjects != nil {
			t.Errorf("%s to %s: %+v, want the failure %q", c.object, c.to, resp.Result, c.message)
		}
	}

	// YAML when the request accepts it; 400 for what it cannot read or
	// answer.
	code, answer := convert("apiextensions.k8s.io/v1", "application/yaml", "stable.example.com/v2", v1Object)
	var got apiextensionsv1.ConversionReview
	if err := yaml.Unmarshal(answer, &got); err != nil || code != http.StatusOK || got.Response == nil || len(got.Response.ConvertedObjects) != 1 || !strings.HasPrefix(string(answer), "apiVersion: apiextensions.k8s.io/v1\n") {
		t.Errorf("YAML: %d %s (%v)", code, answer, err)
	}
	if code, answer := convert("apiextensions.k8s.io/v1", "text/html", "stable.example.com/v2", v1Object); code != http.StatusBadRequest || string(answer) != "invalid accept header `text/html`\n" {
		t.Errorf("Accept text/html: %d %q", code, answer)
	}
	code, answer = post(t, client, base+"/crdconvert", "text/plain", []byte("{}"))
	if code != http.StatusBadRequest || string(answer) != "invalid Content-Type header `text/plain`\n" {
		t.Errorf("text/plain: %d %q", code, answer)
	}
	code, answer = post(t, client, base+"/crdconvert", "application/json", []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition"}`))
	if code != http.StatusBadRequest || string(answer) != "Unsupported group version kind: apiextensions.k8s.io/v1, Kind=CustomResourceDefinition\n" {
		t.Errorf("a CRD: %d %q", code, answer)
	}
}

// The serializer of an answer is the first the Accept header's clauses
// take, by their q and then their specificity.
func TestConversionOutput(t *testing.T) {
	serializers := conversionSerializers()
	for accept, want := range map[string]runtime.Serializer{
		"":                      serializers["application/json"],
		"application/json, */*": serializers["application/json"],
		"*/*, application/yaml": serializers["application/yaml"],
		"application/json;q=0.5, application/yaml": serializers["application/yaml"],
		"application/*":      serializers["application/json"],
		"*":                  serializers["application/json"],
		"text/plain":         nil,
		"application/json/x": nil,
	} {
		if got := conversionOutput(accept); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}
