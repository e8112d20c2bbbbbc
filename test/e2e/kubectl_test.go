package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fields splits a table line into its columns.
func fields(line string) []string { return strings.Fields(line) }

// tableRow finds the row whose first column is name and returns the header
// and that row's columns.
func tableRow(t *testing.T, out, name string) (header, row []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("no table rows in:\n%s", out)
	}
	header = fields(lines[0])
	for _, l := range lines[1:] {
		f := fields(l)
		if len(f) > 0 && f[0] == name {
			return header, f
		}
	}
	t.Fatalf("no row %q in:\n%s", name, out)
	return nil, nil
}

const multiDoc = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  labels: {app: web, tier: front}
data:
  color: blue
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  labels: {app: web}
stringData:
  password: s3cret
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
`

const listDoc = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: list-one, labels: {app: listed}}
  data: {k: v}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: list-two, labels: {app: listed}}
  data: {k: w}
`

func TestKubectlApplyGetDescribe(t *testing.T) {
	t.Parallel()
	c := startCluster(t)

	out := c.withStdin(multiDoc, "apply", "-f", "-")
	for _, want := range []string{"configmap/app-config created", "secret/app-secret created", "namespace/team-a created"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	// Applying again changes nothing.
	out = c.withStdin(multiDoc, "apply", "-f", "-")
	if !strings.Contains(out, "configmap/app-config unchanged") {
		t.Errorf("second apply: %s", out)
	}
	// A kind: List file needs the protobuf OpenAPI v2 for validation.
	out = c.withStdin(listDoc, "apply", "-f", "-")
	if !strings.Contains(out, "configmap/list-one created") || !strings.Contains(out, "configmap/list-two created") {
		t.Errorf("apply List: %s", out)
	}

	header, row := tableRow(t, c.must("get", "configmaps"), "app-config")
	if strings.Join(header, " ") != "NAME DATA AGE" || row[1] != "1" {
		t.Errorf("get configmaps: header %v row %v", header, row)
	}
	header, row = tableRow(t, c.must("get", "secrets"), "app-secret")
	if strings.Join(header, " ") != "NAME TYPE DATA AGE" || row[1] != "Opaque" || row[2] != "1" {
		t.Errorf("get secrets: header %v row %v", header, row)
	}
	header, row = tableRow(t, c.must("get", "namespaces"), "team-a")
	if strings.Join(header, " ") != "NAME STATUS AGE" || row[1] != "Active" {
		t.Errorf("get namespaces: header %v row %v", header, row)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		tableRow(t, c.must("get", "ns"), ns)
	}

	// Output formats.
	y := c.must("get", "cm", "app-config", "-o", "yaml")
	for _, want := range []string{"kind: ConfigMap", "color: blue", "resourceVersion:", "uid:", "creationTimestamp:"} {
		if !strings.Contains(y, want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, y)
		}
	}
	var obj map[string]interface{}
	if err := json.Unmarshal([]byte(c.must("get", "cm", "app-config", "-o", "json")), &obj); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if obj["kind"] != "ConfigMap" {
		t.Errorf("-o json kind = %v", obj["kind"])
	}
	if got := c.must("get", "cm", "app-config", "-o", "jsonpath={.data.color}"); got != "blue" {
		t.Errorf("jsonpath = %q", got)
	}
	if got := c.must("get", "cm", "-l", "app=listed", "-o", "name"); got != "configmap/list-one\nconfigmap/list-two\n" {
		t.Errorf("-l app=listed -o name = %q", got)
	}

	d := c.must("describe", "cm", "app-config")
	for _, want := range []string{"Name:", "app-config", "Labels:", "app=web", "color:", "blue"} {
		if !strings.Contains(d, want) {
			t.Errorf("describe lacks %q:\n%s", want, d)
		}
	}

	out = c.must("api-resources")
	for _, re := range []string{`(?m)^configmaps\s+cm\s+v1\s+true\s+ConfigMap$`, `(?m)^namespaces\s+ns\s+v1\s+false\s+Namespace$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("api-resources lacks %s:\n%s", re, out)
		}
	}
}

func TestKubectlServerSideApply(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n"
	out := c.withStdin(manifest, "apply", "--server-side", "-f", "-")
	if !strings.Contains(out, "configmap/ssa serverside-applied") {
		t.Fatalf("ssa create: %s", out)
	}
	mf := c.must("get", "cm", "ssa", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[0].manager}/{.metadata.managedFields[0].operation}")
	if mf != "kubectl/Apply" {
		t.Errorf("managedFields = %q, want kubectl/Apply", mf)
	}
	// Another manager changing the field conflicts.
	c.must("patch", "cm", "ssa", "-p", `{"data":{"a":"2"}}`)
	out, err := c.kubectl(manifest, "apply", "--server-side", "-f", "-")
	if err == nil || !strings.Contains(out, "conflict") || !strings.Contains(out, ".data.a") {
		t.Fatalf("conflicting apply: err %v\n%s", err, out)
	}
	c.withStdin(manifest, "apply", "--server-side", "--force-conflicts", "-f", "-")
	if got := c.must("get", "cm", "ssa", "-o", "jsonpath={.data.a}"); got != "1" {
		t.Errorf("after forced apply a = %q", got)
	}
}

func TestKubectlPatchLabelAnnotateEditDelete(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.must("create", "configmap", "p", "--from-literal=a=1", "--from-literal=b=2")
	c.must("patch", "cm", "p", "-p", `{"data":{"c":"3"}}`)
	c.must("patch", "cm", "p", "--type=merge", "-p", `{"data":{"b":null}}`)
	c.must("patch", "cm", "p", "--type=json", "-p", `[{"op":"replace","path":"/data/a","value":"10"}]`)
	if got := c.must("get", "cm", "p", "-o", "jsonpath={.data}"); got != `{"a":"10","c":"3"}` {
		t.Errorf("data after patches = %s", got)
	}
	c.must("label", "cm", "p", "env=prod")
	c.must("annotate", "cm", "p", "note=hello")
	if got := c.must("get", "cm", "p", "-o", "jsonpath={.metadata.labels.env}/{.metadata.annotations.note}"); got != "prod/hello" {
		t.Errorf("label/annotation = %q", got)
	}
	c.must("label", "cm", "p", "env-")
	if got := c.must("get", "cm", "p", "--show-labels", "--no-headers"); strings.Contains(got, "env=prod") {
		t.Errorf("label not removed: %s", got)
	}

	// edit with a non-interactive editor.
	editor := filepath.Join(t.TempDir(), "editor.sh")
	if err := os.WriteFile(editor, []byte("#!/bin/sh\nsed -i 's/^  c: \"3\"/  c: \"edited\"/' \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := c.kubectlEnv([]string{"EDITOR=" + editor}, "edit", "cm", "p")
	if err != nil || !strings.Contains(out, "configmap/p edited") {
		t.Fatalf("edit: %v\n%s", err, out)
	}
	if got := c.must("get", "cm", "p", "-o", "jsonpath={.data.c}"); got != "edited" {
		t.Errorf("after edit c = %q", got)
	}

	c.createNamespace("other")
	c.must("create", "secret", "generic", "s1", "--from-literal=k=v", "-n", "other")
	if got := c.must("get", "secret", "s1", "-n", "other", "-o", "jsonpath={.data.k}"); got != "dg==" {
		t.Errorf("secret data = %q", got)
	}

	c.must("create", "cm", "d1", "--from-literal=x=1")
	c.must("create", "cm", "d2", "--from-literal=x=1")
	c.must("label", "cm", "d1", "d2", "group=gone")
	out = c.must("delete", "cm", "-l", "group=gone")
	if !strings.Contains(out, `configmap "d1" deleted`) || !strings.Contains(out, `configmap "d2" deleted`) {
		t.Errorf("delete -l: %s", out)
	}
	if got := c.must("get", "cm", "-l", "group=gone", "-o", "name"); got != "" {
		t.Errorf("left after delete -l: %q", got)
	}
}

func TestKubectlWatchSeesChange(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.must("create", "cm", "w", "--from-literal=a=1")
	lines := make(chan string, 10)
	stop := c.kubectlStream(lines, "get", "cm", "w", "-w", "-o", "jsonpath={.data.a}{\"\\n\"}")
	defer stop()
	select {
	case l := <-lines:
		if l != "1" {
			t.Fatalf("first watch line %q, want 1", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kubectl get -w printed nothing")
	}
	c.must("patch", "cm", "w", "-p", `{"data":{"a":"2"}}`)
	select {
	case l := <-lines:
		if l != "2" {
			t.Fatalf("watch line %q, want 2", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kubectl get -w did not print the change")
	}
}

func TestKubectlExplain(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	out := c.must("explain", "configmap.data")
	if !strings.Contains(out, "KIND:") || !strings.Contains(out, "ConfigMap") || !strings.Contains(out, "FIELD: data") {
		t.Errorf("explain configmap.data:\n%s", out)
	}
	out = c.must("explain", "service.spec")
	if !strings.Contains(out, "clusterIP") || !strings.Contains(out, "sessionAffinity") {
		t.Errorf("explain service.spec:\n%s", out)
	}
}
