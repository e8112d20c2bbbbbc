package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Keys of the encryption tests (base64 of 32 bytes each).
const (
	encKey1 = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/Pz8/Pz8="
	encKey2 = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY="
	encKey3 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
)

// encAESCBC is an aescbc provider of the keys "name=secret" in order.
func encAESCBC(keys ...string) string {
	s := "      - aescbc:\n          keys:\n"
	for _, k := range keys {
		name, secret, _ := strings.Cut(k, "=")
		s += "            - name: " + name + "\n              secret: " + secret + "\n"
	}
	return s
}

const encIdentity = "      - identity: {}\n"

// encWriteConfig writes an EncryptionConfiguration whose secrets entry has
// the given providers; ConfigMaps are under secretbox and the apps group
// under aesgcm, each with identity after, for the objects stored before.
func encWriteConfig(t *testing.T, path string, secretProviders ...string) {
	t.Helper()
	config := `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
` + strings.Join(secretProviders, "") + `  - resources:
      - configmaps
    providers:
      - secretbox:
          keys:
            - name: s1
              secret: ` + encKey3 + `
      - identity: {}
  - resources:
      - '*.apps'
    providers:
      - aesgcm:
          keys:
            - name: g1
              secret: ` + encKey3 + `
      - identity: {}
`
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// encSetConfig makes the cluster's next starts use path as its
// --encryption-provider-config ("": none).
func (c *cluster) encSetConfig(path string) {
	if i := slices.Index(c.extraArgs, "--encryption-provider-config"); i >= 0 {
		c.extraArgs = slices.Delete(c.extraArgs, i, i+2)
	}
	if path != "" {
		c.extraArgs = append(c.extraArgs, "--encryption-provider-config", path)
	}
}

// etcdValue is the value stored under key.
func etcdValue(t *testing.T, cli *clientv3.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatalf("etcd has no %s", key)
	}
	return string(resp.Kvs[0].Value)
}

// encWantStored checks that key's value has prefix and does not show
// secret in plain or base64.
func encWantStored(t *testing.T, cli *clientv3.Client, key, prefix, secret string) {
	t.Helper()
	v := etcdValue(t, cli, key)
	if !strings.HasPrefix(v, prefix) {
		t.Errorf("%s is stored as %.30q, want the prefix %q", key, v, prefix)
	}
	if secret != "" && (strings.Contains(v, secret) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(secret)))) {
		t.Errorf("%s shows %q in etcd: %q", key, secret, v)
	}
}

// encUpFails runs `svcnet up` with the cluster's flags and more, which
// must refuse to start, and returns what it said.
func (c *cluster) encUpFails(t *testing.T, more ...string) string {
	t.Helper()
	args := append([]string{"up", "--data-dir", c.dataDir, "--bind-address", c.apiAddr,
		"--etcd-client-url", c.etcdClient, "--etcd-peer-url", c.etcdPeer}, c.extraArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, append(args, more...)...).CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("svcnet up %v did not refuse to start (%v):\n%s", more, err, out)
	}
	return string(out)
}

// secretData is a Secret's value of key, decoded, as kubectl shows it.
func (c *cluster) secretData(name, key string) string {
	c.t.Helper()
	out := c.must("get", "secret", name, "-o", "jsonpath={.data."+key+"}")
	v, err := base64.StdEncoding.DecodeString(out)
	if err != nil {
		c.t.Fatalf("secret %s: %q: %v", name, out, err)
	}
	return string(v)
}

// TestEncryption is encryption at rest end to end: turning it on keeps the
// Secrets stored before readable, new ones are stored encrypted behind
// upstream's prefixes, informers keep working, upstream's key rotation
// works across restarts, a missing or wrong key answers reads of Secrets
// with an internal error while the rest works, bad configurations stop the
// API server from starting, and up --encrypt-secrets encrypts Secrets with
// a key of its own.
func TestEncryption(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	etcd := c.etcd()
	// The steps share the cluster, whose helpers report to the step's t.
	step := func(name string, f func(t *testing.T)) bool {
		return t.Run(name, func(st *testing.T) {
			c.t = st
			defer func() { c.t = t }()
			f(st)
		})
	}
	config := filepath.Join(t.TempDir(), "encryption.yaml")
	c.must("create", "secret", "generic", "before", "--from-literal=password=plain-before")
	encWantStored(t, etcd, "/registry/secrets/default/before", "{", "")

	ok := step("on", func(t *testing.T) {
		encWriteConfig(t, config, encAESCBC("key1="+encKey1), encIdentity)
		c.encSetConfig(config)
		c.restart()
		// Stored before: read through identity.
		if got := c.secretData("before", "password"); got != "plain-before" {
			t.Errorf("secret stored before reads %q", got)
		}
		c.must("create", "secret", "generic", "after", "--from-literal=password=hunter2")
		encWantStored(t, etcd, "/registry/secrets/default/after", "k8s:enc:aescbc:v1:key1:", "hunter2")
		if got := c.secretData("after", "password"); got != "hunter2" {
			t.Errorf("secret reads %q", got)
		}
		if out := c.must("get", "secret", "after", "-o", "yaml"); !strings.Contains(out, "password: aHVudGVyMg==") {
			t.Errorf("kubectl get -o yaml:\n%s", out)
		}
		c.must("create", "configmap", "settings", "--from-literal=color=teal")
		encWantStored(t, etcd, "/registry/configmaps/default/settings", "k8s:enc:secretbox:v1:s1:", "teal")
		if out := c.must("get", "configmap", "settings", "-o", "jsonpath={.data.color}"); out != "teal" {
			t.Errorf("configmap reads %q", out)
		}
		c.must("create", "deployment", "web", "--image=nginx")
		encWantStored(t, etcd, "/registry/deployments/default/web", "k8s:enc:aesgcm:v1:g1:", "")
		c.must("get", "deployment", "web")
		c.must("create", "service", "clusterip", "plain", "--tcp=80:80")
		encWantStored(t, etcd, "/registry/services/default/plain", "{", "")
	})
	ok = ok && step("informer", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
		inf := factory.Core().V1().Secrets().Informer()
		factory.Start(ctx.Done())
		defer func() { cancel(); factory.Shutdown() }()
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("the Secret informer did not sync")
		}
		lister := factory.Core().V1().Secrets().Lister().Secrets("default")
		for name, want := range map[string]string{"before": "plain-before", "after": "hunter2"} {
			if s, err := lister.Get(name); err != nil || string(s.Data["password"]) != want {
				t.Errorf("informer's %s: %v", name, err)
			}
		}
		_, err = cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "watched"},
			StringData: map[string]string{"token": "one"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() string {
			if s, err := lister.Get("watched"); err != nil || string(s.Data["token"]) != "one" {
				return "the informer has not seen the new Secret"
			}
			return ""
		})
		c.must("patch", "secret", "watched", "-p", `{"stringData":{"token":"two"}}`)
		eventually(t, 10*time.Second, func() string {
			if s, err := lister.Get("watched"); err != nil || string(s.Data["token"]) != "two" {
				return "the informer has not seen the update"
			}
			return ""
		})
		encWantStored(t, etcd, "/registry/secrets/default/watched", "k8s:enc:aescbc:v1:key1:", "two")
	})
	// Upstream's procedure: add key2 second, restart; move it first,
	// restart; rewrite every Secret; drop key1, restart.
	ok = ok && step("rotate", func(t *testing.T) {
		encWriteConfig(t, config, encAESCBC("key1="+encKey1, "key2="+encKey2), encIdentity)
		c.restart()
		c.must("create", "secret", "generic", "during", "--from-literal=password=during")
		encWantStored(t, etcd, "/registry/secrets/default/during", "k8s:enc:aescbc:v1:key1:", "during")
		encWriteConfig(t, config, encAESCBC("key2="+encKey2, "key1="+encKey1), encIdentity)
		c.restart()
		c.must("create", "secret", "generic", "rotated", "--from-literal=password=rotated")
		encWantStored(t, etcd, "/registry/secrets/default/rotated", "k8s:enc:aescbc:v1:key2:", "rotated")
		encWantStored(t, etcd, "/registry/secrets/default/after", "k8s:enc:aescbc:v1:key1:", "hunter2")
		all := c.must("get", "secrets", "-A", "-o", "json")
		if out := c.withStdin(all, "replace", "-f", "-"); !strings.Contains(out, `secret/after replaced`) {
			t.Errorf("kubectl replace:\n%s", out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := etcd.Get(ctx, "/registry/secrets/", clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("list Secrets in etcd: %v", err)
		}
		if len(resp.Kvs) < 5 {
			t.Fatalf("etcd holds %d Secrets, want at least 5", len(resp.Kvs))
		}
		for _, kv := range resp.Kvs {
			if !strings.HasPrefix(string(kv.Value), "k8s:enc:aescbc:v1:key2:") {
				t.Errorf("after the replace, %s is stored as %.30q", kv.Key, kv.Value)
			}
		}
		// Without key1 and without identity, every Secret still reads.
		encWriteConfig(t, config, encAESCBC("key2="+encKey2))
		c.restart()
		for name, want := range map[string]string{"before": "plain-before", "after": "hunter2", "during": "during", "rotated": "rotated"} {
			if got := c.secretData(name, "password"); got != want {
				t.Errorf("after the rotation %s reads %q", name, got)
			}
		}
		c.must("get", "secrets", "-A")
	})
	ok = ok && step("wrong key", func(t *testing.T) {
		// key2's secret under another name: no key matches.
		encWriteConfig(t, config, encAESCBC("key3="+encKey2))
		c.restart()
		out := c.fails("get", "secret", "after")
		if want := "Error from server (InternalError): Internal error occurred: no matching key was found for the provided AES transformer"; !strings.Contains(out, want) {
			t.Errorf("get with the key renamed:\n%s\nwant %s", out, want)
		}
		out = c.fails("get", "secrets")
		if want := `Internal error occurred: unable to transform key "/registry/secrets/default/after": no matching key was found for the provided AES transformer`; !strings.Contains(out, want) {
			t.Errorf("list with the key renamed:\n%s\nwant %s", out, want)
		}
		// The other resources work.
		c.must("create", "configmap", "still", "--from-literal=a=b")
		if out := c.must("get", "configmap", "settings", "-o", "jsonpath={.data.color}"); out != "teal" {
			t.Errorf("configmap reads %q", out)
		}
		c.must("get", "deployment", "web")
		// key2's name with another secret: the value does not decrypt.
		encWriteConfig(t, config, encAESCBC("key2="+encKey1))
		c.restart()
		if out := c.fails("get", "secret", "after"); !strings.Contains(out, "Error from server (InternalError): Internal error occurred: ") {
			t.Errorf("get with a wrong key:\n%s", out)
		}
		c.must("get", "services")
	})
	ok = ok && step("config removed", func(t *testing.T) {
		c.encSetConfig("")
		c.restart()
		out := c.fails("get", "secret", "after")
		if want := "Error from server (InternalError): Internal error occurred: identity transformer tried to read encrypted data"; !strings.Contains(out, want) {
			t.Errorf("get without the configuration:\n%s\nwant %s", out, want)
		}
		c.must("create", "service", "clusterip", "more", "--tcp=80:80")
		c.must("get", "namespaces")
	})
	ok = ok && step("bad config", func(t *testing.T) {
		c.stop()
		missing := filepath.Join(t.TempDir(), "missing.yaml")
		out := c.encUpFails(t, "--encryption-provider-config", missing)
		if want := `svcnet: error while parsing file: error while loading file: error reading encryption provider configuration file "` + missing + `": open ` + missing + `: no such file or directory`; !strings.Contains(out, want) {
			t.Errorf("missing file:\n%s\nwant %s", out, want)
		}
		encWriteConfig(t, config, encAESCBC("key1=c2hvcnQ="))
		out = c.encUpFails(t, "--encryption-provider-config", config)
		if want := `svcnet: error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 5, expected one of [16 24 32]`; !strings.Contains(out, want) {
			t.Errorf("short key:\n%s\nwant %s", out, want)
		}
		encWriteConfig(t, config, "      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: unix:///run/kms.sock\n")
		out = c.encUpFails(t, "--encryption-provider-config", config)
		if want := `resources[0].providers[0].kms: Forbidden: KMS providers are not supported by svcnet: use aescbc, aesgcm, secretbox or identity`; !strings.Contains(out, want) {
			t.Errorf("kms:\n%s\nwant %s", out, want)
		}
		out = c.encUpFails(t, "--encryption-provider-config", config, "--encrypt-secrets")
		if want := "svcnet: --encrypt-secrets and --encryption-provider-config are mutually exclusive"; !strings.Contains(out, want) {
			t.Errorf("both flags:\n%s\nwant %s", out, want)
		}
	})
	_ = ok

	t.Run("encrypt-secrets", func(t *testing.T) {
		e := startCluster(t, "--encrypt-secrets")
		path := filepath.Join(e.dataDir, "pki", "encryption-config.yaml")
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v", path, st, err)
		}
		first, _ := os.ReadFile(path)
		e.must("create", "secret", "generic", "db", "--from-literal=password=hunter2")
		encWantStored(t, e.etcd(), "/registry/secrets/default/db", "k8s:enc:aescbc:v1:key1:", "hunter2")
		e.must("create", "configmap", "plain", "--from-literal=a=b")
		encWantStored(t, e.etcd(), "/registry/configmaps/default/plain", "{", "")
		e.restart()
		if again, _ := os.ReadFile(path); string(again) != string(first) {
			t.Error("the generated configuration changed across a restart")
		}
		if got := e.secretData("db", "password"); got != "hunter2" {
			t.Errorf("after a restart the Secret reads %q", got)
		}
	})
}
