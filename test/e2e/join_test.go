package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// svcnet runs the svcnet binary with args against the cluster and returns
// its combined output, failing the test on an error.
func (c *cluster) svcnet(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig())
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("svcnet %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tokenKubeconfig is a kubeconfig of the cluster's API server whose user
// is the bearer token alone.
func (c *cluster) tokenKubeconfig(token string) string {
	c.t.Helper()
	admin, err := clientcmd.LoadFromFile(c.kubeconfig())
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	path := filepath.Join(c.t.TempDir(), "token.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}

// TestBootstrapTokens: svcnet token creates, lists and deletes tokens; a
// token authenticates as system:bootstrap:<id> until it is deleted or
// expires; the token cleaner deletes expired ones; cluster-info is signed
// for each signing token.
func TestBootstrapTokens(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	line := strings.TrimSpace(c.svcnet("token", "create", "--print-join-command"))
	f := strings.Fields(line)
	if len(f) != 8 || strings.Join(f[:3], " ") != "svcnet node --server" || f[4] != "--token" || f[6] != "--discovery-token-ca-cert-hash" ||
		!strings.HasPrefix(f[3], "https://") || !strings.HasPrefix(f[7], "sha256:") || len(f[7]) != len("sha256:")+64 {
		t.Fatalf("join command %q", line)
	}
	token := f[5]
	id := token[:6]
	list := c.svcnet("token", "list")
	if !strings.HasPrefix(list, "TOKEN") || !strings.Contains(list, "EXTRA GROUPS") || !strings.Contains(list, token) ||
		!strings.Contains(list, "authentication,signing") || !strings.Contains(list, "system:bootstrappers:kubeadm:default-node-token") {
		t.Errorf("token list:\n%s", list)
	}
	// Authenticates, with kubeadm's groups; may read cluster-info (as
	// anyone may) but not Secrets.
	kc := c.tokenKubeconfig(token)
	eventually(t, 10*time.Second, func() string {
		out, err := c.kubectl("", "--kubeconfig", kc, "auth", "whoami")
		if err != nil || !strings.Contains(out, "system:bootstrap:"+id) ||
			!strings.Contains(out, "[system:bootstrappers system:bootstrappers:kubeadm:default-node-token system:authenticated]") {
			return fmt.Sprintf("whoami: %v\n%s", err, out)
		}
		return ""
	})
	if out := c.fails("--kubeconfig", kc, "get", "secrets", "-n", "kube-system"); !strings.Contains(out, `User "system:bootstrap:`+id+`" cannot list resource "secrets"`) {
		t.Errorf("bootstrap token lists secrets: %s", out)
	}
	// cluster-info is signed for the token, and readable anonymously.
	eventually(t, 10*time.Second, func() string {
		out, _ := c.kubectl("", "get", "configmap", "cluster-info", "-n", "kube-public", "-o", "jsonpath={.data.jws-kubeconfig-"+id+"}")
		if !strings.Contains(out, "..") {
			return "no signature for " + id + " in cluster-info: " + out
		}
		return ""
	})
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	resp, err := anon.Get("https://" + c.apiAddr + "/api/v1/namespaces/kube-public/configmaps/cluster-info")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "certificate-authority-data") || strings.Contains(string(body), "client-key") {
		t.Errorf("anonymous read of cluster-info: %s\n%s", resp.Status, body)
	}
	if resp, err := anon.Get("https://" + c.apiAddr + "/api/v1/namespaces/kube-public/configmaps"); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous list of kube-public's ConfigMaps: %s, want 403", resp.Status)
	}

	// Deleted: refused (once the token cache's 10s have passed), and the
	// signature goes.
	if out := c.svcnet("token", "delete", token); out != fmt.Sprintf("bootstrap token %q deleted\n", id) {
		t.Errorf("delete: %q", out)
	}
	eventually(t, 20*time.Second, func() string {
		if out, err := c.kubectl("", "--kubeconfig", kc, "auth", "whoami"); err == nil || !strings.Contains(out, "Unauthorized") {
			return "deleted token still authenticates: " + out
		}
		return ""
	})
	eventually(t, 10*time.Second, func() string {
		out := c.must("get", "configmap", "cluster-info", "-n", "kube-public", "-o", "jsonpath={.data}")
		if strings.Contains(out, "jws-kubeconfig-"+id) {
			return "signature of a deleted token kept: " + out
		}
		return ""
	})

	// Expiring: authenticates, then is refused, and the token cleaner
	// deletes its Secret.
	short := strings.TrimSpace(c.svcnet("token", "create", "--ttl", "3s", "--description", "short"))
	skc := c.tokenKubeconfig(short)
	eventually(t, 10*time.Second, func() string {
		if out, err := c.kubectl("", "--kubeconfig", skc, "auth", "whoami"); err != nil {
			return "new token refused: " + out
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		out, err := c.kubectl("", "get", "secret", "-n", "kube-system", "bootstrap-token-"+short[:6])
		if err == nil || !strings.Contains(out, "NotFound") {
			return "expired token not cleaned: " + out
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		if out, err := c.kubectl("", "--kubeconfig", skc, "auth", "whoami"); err == nil || !strings.Contains(out, "Unauthorized") {
			return "expired token still authenticates: " + out
		}
		return ""
	})
}

// TestJoinNode: a second machine joins with the line svcnet token create
// --print-join-command prints: its node registers with a certificate from
// an approved CSR, gets Ready and runs a pod; restarted, it reuses its
// kubeconfig.
func TestJoinNode(t *testing.T) {
	t.Parallel()
	needRoot(t)
	prefix := fmt.Sprintf("svcnet-e2e-%d-%d", os.Getpid(), netnsSeq.Add(1))
	l := newLAN(t, prefix)
	ips := [2]string{"172.31.253.1", "172.31.253.2"}
	ns1, ns2 := newNetns(t, prefix+"-n1"), newNetns(t, prefix+"-n2")
	l.attach(ns1, ips[0])
	l.attach(ns2, ips[1])
	c := &nodeCluster{netns: ns1}
	c.cluster = startCluster(t, "--nodes", "1", "--netns", ns1, "--node-name", nodeName, "--node-ip", ips[0], "--metrics-bind-address", "0",
		"--kubelet-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	t.Cleanup(func() {
		c.stop()
		reapNode(t, c.dataDir)
	})
	line := strings.TrimSpace(c.svcnet("token", "create", "--print-join-command"))
	join := strings.Fields(line)
	if len(join) != 8 || join[3] != "https://"+ips[0]+":"+strings.Split(c.apiAddr, ":")[1] {
		t.Fatalf("join command %q: want the server at the advertised address %s", line, ips[0])
	}
	dir2 := t.TempDir()
	joined := nodeName + "-joined"
	start := func() (*exec.Cmd, *logBuffer) {
		args := append(append([]string{"ip", "netns", "exec", ns2, binary}, join[1:]...), "--data-dir", dir2, "--node-name", joined,
			"--node-ip", ips[1], "--kubelet-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--stop-pods-on-exit")
		cmd := exec.Command(args[0], args[1:]...)
		log := &logBuffer{}
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start the joining node: %v", err)
		}
		return cmd, log
	}
	stop := func(cmd *exec.Cmd, log *logBuffer) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("joined node exited with %v; log:\n%s", err, log.String())
		}
	}
	node, log := start()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop(node, log)
		}
		reapNode(t, dir2)
	})
	eventually(t, 60*time.Second, func() string {
		out, _ := c.kubectl("", "get", "node", joined, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if out != "True" {
			return "joined node not Ready: " + out + "\nits log:\n" + log.String()
		}
		return ""
	})
	// Its CSR: the kubelet's, by the token's user, approved and issued.
	csrs := c.must("get", "csr", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.username} {.spec.signerName} {.status.conditions[0].type} {.status.certificate}{"\n"}{end}`)
	found := false
	for _, l := range strings.Split(strings.TrimSpace(csrs), "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && strings.HasPrefix(f[0], "node-csr-") && f[1] == "system:bootstrap:"+join[5][:6] &&
			f[2] == "kubernetes.io/kube-apiserver-client-kubelet" && f[3] == "Approved" && f[4] != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no approved, issued node CSR of the token's user:\n%s", csrs)
	}
	// It runs a pod.
	c.must("run", "joined-pod", "--image", "nginx", "--overrides", `{"spec":{"nodeName":"`+joined+`"}}`)
	c.waitReady("joined-pod", "True", 60*time.Second)
	// As system:node:<joined> under the Node authorizer, it reads what its
	// pods use (their kube-root-ca.crt) and no other Secret.
	c.must("create", "secret", "generic", "not-for-nodes", "--from-literal=pw=x")
	as := func(args ...string) []string {
		return append([]string{"--kubeconfig", filepath.Join(dir2, "kubelet.conf"), "--server", "https://" + c.apiAddr}, args...)
	}
	if out := c.must(as("get", "configmap", "kube-root-ca.crt", "-o", "name")...); strings.TrimSpace(out) != "configmap/kube-root-ca.crt" {
		t.Errorf("the joined node reads its pod's ConfigMap: %q", out)
	}
	if out, want := c.fails(as("get", "secret", "not-for-nodes")...), `User "system:node:`+joined+`" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node '`+joined+`' and this object`; !strings.Contains(out, want) {
		t.Errorf("the joined node reads a Secret none of its pods uses:\n%s\nwant %s", out, want)
	}

	// Restarted with the token deleted, it runs on its kubeconfig: a new
	// pod runs there.
	stop(node, log)
	c.svcnet("token", "delete", join[5])
	node, log = start()
	eventually(t, 30*time.Second, func() string {
		if !strings.Contains(log.String(), "node kubeconfig present") {
			return "restarted node did not reuse its kubeconfig:\n" + log.String()
		}
		return ""
	})
	c.must("run", "joined-pod-2", "--image", "nginx", "--overrides", `{"spec":{"nodeName":"`+joined+`"}}`)
	c.waitReady("joined-pod-2", "True", 60*time.Second)
	stop(node, log)
	stopped = true
}
