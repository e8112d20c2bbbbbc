package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRestartKeepsObjects: after `svcnet up` restarts on the same data dir,
// every object is there with its resourceVersion, and etcd holds them as
// JSON under /registry/.
func TestRestartKeepsObjects(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	c.createNamespace("keep")
	c.must("create", "configmap", "kept", "-n", "keep", "--from-literal=a=1")
	c.must("create", "secret", "generic", "kept", "-n", "keep", "--from-literal=a=1")
	before := c.must("get", "cm,secret", "-n", "keep", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion}/{.metadata.uid} {end}")

	c.restart()

	after := c.must("get", "cm,secret", "-n", "keep", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.resourceVersion}/{.metadata.uid} {end}")
	if before != after || !strings.Contains(after, "ConfigMap/kept@") || !strings.Contains(after, "Secret/kept@") {
		t.Fatalf("objects changed across restart:\nbefore %s\nafter  %s", before, after)
	}

	cli := c.etcd()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/registry/configmaps/keep/kept")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get /registry/configmaps/keep/kept: %v %v", err, resp)
	}
	var doc struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Data       map[string]string `json:"data"`
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &doc); err != nil {
		t.Fatalf("stored value is not JSON: %v\n%s", err, resp.Kvs[0].Value)
	}
	if doc.APIVersion != "v1" || doc.Kind != "ConfigMap" || doc.Data["a"] != "1" {
		t.Fatalf("stored document = %+v", doc)
	}
	// The stored resourceVersion is the key's mod revision.
	rv := c.must("get", "cm", "kept", "-n", "keep", "-o", "jsonpath={.metadata.resourceVersion}")
	if want := resp.Kvs[0].ModRevision; rv != itoa(want) {
		t.Fatalf("resourceVersion %s, etcd mod revision %d", rv, want)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "keep"} {
		r, err := cli.Get(ctx, "/registry/namespaces/"+ns)
		if err != nil || len(r.Kvs) != 1 {
			t.Errorf("namespace %s not stored: %v", ns, err)
		}
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
