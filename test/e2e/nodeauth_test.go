package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeIdentity: svcnet up's node is system:node:<name> under the Node
// authorizer and NodeRestriction: it reads the Secrets and ConfigMaps of
// its own pods and no others, lists no collection of them, and may write
// only its own Node (not its taints, nor labels the kubelet does not set)
// and only mirror pods; its pods still get their volumes, and a change
// to a ConfigMap they mount still reaches them.
func TestNodeIdentity(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	node := filepath.Join(c.dataDir, "kubelet-client.conf")
	as := func(args ...string) []string { return append([]string{"--kubeconfig", node}, args...) }

	if out := c.must(as("auth", "whoami")...); !strings.Contains(out, "system:node:"+nodeName) || !strings.Contains(out, "[system:nodes system:authenticated]") {
		t.Errorf("the node's whoami:\n%s", out)
	}
	if out := c.must("get", "node", nodeName, "-o", "jsonpath={.metadata.labels}"); !strings.Contains(out, `"node-role.kubernetes.io/control-plane":""`) {
		t.Errorf("the control plane's node is not labelled as such: %s", out)
	}

	c.createNamespace("nodeauth")
	c.must("create", "secret", "generic", "used", "-n", "nodeauth", "--from-literal=pw=s3cret")
	c.must("create", "secret", "generic", "unused", "-n", "nodeauth", "--from-literal=pw=other")
	c.must("create", "configmap", "conf", "-n", "nodeauth", "--from-literal=k=v1")
	c.withStdin(`apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: nodeauth}
spec:
  containers:
  - name: c
    image: busybox
    command: ["sleep", "3600"]
    volumeMounts: [{name: s, mountPath: /s}, {name: c, mountPath: /c}]
  volumes:
  - {name: s, secret: {secretName: used}}
  - {name: c, configMap: {name: conf}}
`, "apply", "-f", "-")
	c.must("wait", "--for=condition=Ready", "pod/reader", "-n", "nodeauth", "--timeout=60s")
	if out := c.must("exec", "-n", "nodeauth", "reader", "--", "cat", "/s/pw", "/c/k"); out != "s3cretv1" {
		t.Errorf("the pod's volumes hold %q, want s3cretv1", out)
	}

	if out := c.must(as("get", "secret", "used", "-n", "nodeauth", "-o", "name")...); strings.TrimSpace(out) != "secret/used" {
		t.Errorf("the node reads its pod's secret: %q", out)
	}
	for _, f := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "secret", "unused", "-n", "nodeauth"},
			`secrets "unused" is forbidden: User "system:node:e2e-node" cannot get resource "secrets" in API group "" in the namespace "nodeauth": no relationship found between node 'e2e-node' and this object`},
		{[]string{"get", "secrets", "-n", "nodeauth"},
			`secrets is forbidden: User "system:node:e2e-node" cannot list resource "secrets" in API group "" in the namespace "nodeauth": No Object name found`},
		{[]string{"label", "node", nodeName, "node-role.kubernetes.io/worker="},
			`nodes "e2e-node" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker`},
		{[]string{"taint", "node", nodeName, "k=v:NoSchedule"},
			`nodes "e2e-node" is forbidden: node "e2e-node" is not allowed to modify taints`},
		{[]string{"run", "sneaky", "-n", "nodeauth", "--image=busybox", "--overrides", `{"spec":{"nodeName":"e2e-node"}}`},
			`pods "sneaky" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "e2e-node" can only create mirror pods`},
		{[]string{"create", "token", "default", "-n", "nodeauth"},
			`serviceaccounts "default" is forbidden: node requested token not bound to a pod`},
	} {
		if out := c.fails(as(f.args...)...); !strings.Contains(out, f.want) {
			t.Errorf("kubectl %s as the node:\n%s\nwant %s", strings.Join(f.args, " "), out, f.want)
		}
	}

	c.withStdin("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf, namespace: nodeauth}\ndata: {k: v2}\n", "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if out := c.must("exec", "-n", "nodeauth", "reader", "--", "cat", "/c/k"); out != "v2" {
			return "the pod's ConfigMap volume holds " + out + ", want v2"
		}
		return ""
	})
}
