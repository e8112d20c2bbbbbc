package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Requests whose answers upstream's kube-apiserver (v1.37) gives as
// below, read from k8s.io/apiserver's handlers and apimachinery's
// option validation.
func TestUpstreamAnswers(t *testing.T) {
	s, _ := newTestServer(t)
	cm := func(name, extra string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `"}` + extra + `}`
	}
	if rec := do(t, s, "POST", "/api/v1/namespaces/default/configmaps", "application/json", "", cm("there", "")); rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	for _, tt := range []struct {
		name, method, path, contentType, body string
		code                                  int
		// message of the Status; for a success, a substring of the body
		want string
		// details: kind.group of a Status
		details string
	}{
		{name: "fieldValidation=Ignore drops unknown fields", method: "POST", path: cms + "?fieldValidation=Ignore",
			body: cm("ignored", `,"bogus":1,"data":{"k":"v"}`), code: 201, want: `"data":{"k":"v"}`},
		{name: "dryRun=bogus on create", method: "POST", path: cms + "?dryRun=bogus", body: cm("x", ""), code: 422,
			want: `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["bogus"]: supported values: "All"`, details: "CreateOptions.meta.k8s.io"},
		{name: "fieldValidation=bogus on create", method: "POST", path: cms + "?fieldValidation=bogus", body: cm("x", ""), code: 422,
			want: `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "bogus": supported values: "", "Ignore", "Strict", "Warn"`, details: "CreateOptions.meta.k8s.io"},
		{name: "two bad options in one answer", method: "PUT", path: cms + "/there?dryRun=bogus&fieldValidation=bogus", body: cm("there", ""), code: 422,
			want: `UpdateOptions.meta.k8s.io "" is invalid: [dryRun: Unsupported value: ["bogus"]: supported values: "All", fieldValidation: Unsupported value: "bogus": supported values: "", "Ignore", "Strict", "Warn"]`, details: "UpdateOptions.meta.k8s.io"},
		{name: "dryRun=bogus on delete", method: "DELETE", path: cms + "/there?dryRun=bogus", code: 422,
			want: `DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["bogus"]: supported values: "All"`, details: "DeleteOptions.meta.k8s.io"},
		{name: "apply without fieldManager", method: "PATCH", path: cms + "/there", contentType: "application/apply-patch+yaml", body: cm("there", ""), code: 422,
			want: `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`, details: "PatchOptions.meta.k8s.io"},
		{name: "force on a merge patch", method: "PATCH", path: cms + "/there?force=true", contentType: "application/merge-patch+json", body: `{}`, code: 422,
			want: `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`, details: "PatchOptions.meta.k8s.io"},
		{name: "resourceVersionMatch without resourceVersion", method: "GET", path: cms + "?resourceVersionMatch=Exact", code: 422,
			want: `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided`, details: "ListOptions.meta.k8s.io"},
		{name: "resourceVersionMatch=Bogus", method: "GET", path: cms + "?resourceVersion=1&resourceVersionMatch=Bogus", code: 422,
			want: `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", "NotOlderThan", ""`, details: "ListOptions.meta.k8s.io"},
		{name: "watch=yes is a watch", method: "GET", path: cms + "?watch=yes&timeoutSeconds=1", code: 200, want: `{"type":"ADDED"`},
		{name: "watch=false is a list", method: "GET", path: cms + "?watch=false", code: 200, want: `"kind":"ConfigMapList"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ct := tt.contentType
			if ct == "" && tt.body != "" {
				ct = "application/json"
			}
			rec := do(t, s, tt.method, tt.path, ct, "application/json", tt.body)
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			if tt.code < 300 {
				if !strings.Contains(rec.Body.String(), tt.want) || strings.Contains(rec.Body.String(), "bogus") || rec.Header().Get("Warning") != "" {
					t.Fatalf("answer %s (warning %q), want it to hold %s", rec.Body, rec.Header().Get("Warning"), tt.want)
				}
				return
			}
			var st metav1.Status
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Message != tt.want || st.Reason != metav1.StatusReasonInvalid || st.Details == nil ||
				st.Details.Kind+"."+st.Details.Group != tt.details || st.Details.Name != "" || len(st.Details.Causes) == 0 {
				t.Fatalf("Status %+v\nwant message %s, reason Invalid, details %s", st, tt.want, tt.details)
			}
		})
	}
	// generateName: the base cut to 58 characters, then 5 random ones.
	base := strings.Repeat("a", 60) // no vowel is random
	rec := do(t, s, "POST", cms, "application/json", "", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"`+base+`"}}`)
	var got metav1.PartialObjectMetadata
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusCreated || err != nil {
		t.Fatalf("create with a 60-character generateName: %d %s", rec.Code, rec.Body)
	}
	if n := got.Name; len(n) != 63 || !strings.HasPrefix(n, base[:58]) || strings.HasPrefix(n, base[:59]) {
		t.Errorf("generated name %q, want 58 a and 5 random characters", n)
	}
}
