package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// raw sends one HTTP request with the admin credentials and returns the
// status code and the decoded Status reason and message.
func (c *cluster) raw(method, path, contentType string, body []byte) (int, string, string) {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		c.t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequest(method, cfg.Host+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &st)
	return resp.StatusCode, st.Reason, st.Message
}

func TestBadInputLeavesStoreUnchanged(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.must("create", "configmap", "keep", "--from-literal=a=1")
	snapshot := func() string {
		return c.must("get", "cm", "-o", "jsonpath={range .items[*]}{.metadata.name}@{.metadata.resourceVersion}:{.data} {end}")
	}
	before := snapshot()

	// An invalid name: 422 with the field cause, in kubectl's words.
	out := c.fails("create", "configmap", "Bad_Name", "--from-literal=a=1")
	if !strings.Contains(out, `ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters`) {
		t.Errorf("invalid name: %s", out)
	}
	code, reason, _ := c.raw("POST", "/api/v1/namespaces/default/configmaps", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}`))
	if code != 422 || reason != "Invalid" {
		t.Errorf("invalid name: %d %s, want 422 Invalid", code, reason)
	}

	// Unknown fields with Strict validation (kubectl's default): 400.
	out, err := c.kubectl("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\nbogus: 1\ndata:\n  a: b\n", "apply", "-f", "-")
	if err == nil || !strings.Contains(out, `Error from server (BadRequest)`) ||
		!strings.Contains(out, `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus"`) {
		t.Errorf("unknown field: %v\n%s", err, out)
	}

	// A stale resourceVersion: 409 Conflict.
	stale := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\n  resourceVersion: \"1\"\ndata:\n  a: changed\n"
	out, err = c.kubectl(stale, "replace", "-f", "-")
	if err == nil || !strings.Contains(out, `Error from server (Conflict)`) ||
		!strings.Contains(out, `Operation cannot be fulfilled on configmaps "keep": the object has been modified; please apply your changes to the latest version and try again`) {
		t.Errorf("stale resourceVersion: %v\n%s", err, out)
	}

	// A body over 3 MiB: 413.
	big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 4<<20) + `"}}`
	code, reason, msg := c.raw("POST", "/api/v1/namespaces/default/configmaps", "application/json", []byte(big))
	if code != 413 || reason != "RequestEntityTooLarge" || msg != "Request entity too large: limit is 3145728" {
		t.Errorf("oversized body: %d %s %q", code, reason, msg)
	}

	// Malformed YAML and JSON: 400.
	code, reason, _ = c.raw("POST", "/api/v1/namespaces/default/configmaps", "application/yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [name: x\n"))
	if code != 400 || reason != "BadRequest" {
		t.Errorf("malformed YAML: %d %s", code, reason)
	}
	code, reason, _ = c.raw("POST", "/api/v1/namespaces/default/configmaps", "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap",`))
	if code != 400 || reason != "BadRequest" {
		t.Errorf("malformed JSON: %d %s", code, reason)
	}

	// A missing namespace: 404 naming the namespace.
	out = c.fails("create", "configmap", "x", "-n", "nope", "--from-literal=a=1")
	if !strings.Contains(out, `namespaces "nope" not found`) {
		t.Errorf("missing namespace: %s", out)
	}
	code, reason, _ = c.raw("POST", "/api/v1/namespaces/nope/configmaps", "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`))
	if code != 404 || reason != "NotFound" {
		t.Errorf("missing namespace: %d %s", code, reason)
	}

	// An anonymous request is refused in upstream's words; a token
	// nobody issued is not even anonymous.
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := anonymous.Get("https://" + c.apiAddr + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body),
		`namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope`) {
		t.Errorf("anonymous list: %d %s, want 403", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", "https://"+c.apiAddr+"/api/v1/namespaces", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err = anonymous.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown bearer token: %d, want 401", resp.StatusCode)
	}

	if after := snapshot(); after != before {
		t.Fatalf("store changed by bad input:\nbefore %s\nafter  %s", before, after)
	}
}

// Requests for APIs svcnet does not serve fail in kubectl's words for
// kube-apiserver's 404s (the plain-text one for a group it does not serve,
// the Status one for an unknown resource of a served group), never naming
// an empty object; a kind nothing serves gets kubectl's hint about CRDs.
func TestUnservedAPIsInKubectlsWords(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	policy := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: np\nspec:\n  podSelector: {}\n"
	mappingNotFound := `error: resource mapping not found for name: "np" namespace: "" from "STDIN": no matches for kind "NetworkPolicy" in version "networking.k8s.io/v1"` +
		"\nensure CRDs are installed first"
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"get", "--raw", "/apis/example.com/v1/widgets"}, "Error from server (NotFound): the server could not find the requested resource"},
		{"", []string{"get", "--raw", "/apis/networking.k8s.io/v1/networkpolicies"}, "Error from server (NotFound): the server could not find the requested resource"},
		{policy, []string{"apply", "-f", "-"}, mappingNotFound},
		{policy, []string{"apply", "--validate=false", "-f", "-"}, mappingNotFound},
	} {
		out, err := c.kubectl(tc.stdin, tc.args...)
		if err == nil || strings.TrimSpace(out) != tc.want {
			t.Errorf("kubectl %s: %v\n%s\nwant\n%s", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}
