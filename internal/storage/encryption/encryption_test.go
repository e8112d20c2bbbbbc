package encryption

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
)

// Keys of the tests: 32, 16 and 32 bytes.
const (
	key32  = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/Pz8/Pz8=" // "secret is secure, or is it??????"
	key16  = "c2VjcmV0IGlzIHNlY3VyZQ=="                     // "secret is secure"
	other  = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=" // a-z123456
	header = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
)

var secrets = schema.GroupResource{Resource: "secrets"}

func parse(t *testing.T, body string) *Config {
	t.Helper()
	c, err := Parse("test.yaml", []byte(header+body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parseErr(t *testing.T, body string) string {
	t.Helper()
	_, err := Parse("test.yaml", []byte(header+body))
	if err == nil {
		t.Fatalf("config accepted:\n%s", body)
	}
	return err.Error()
}

func write(t *testing.T, tr value.Transformer, key string, data []byte) []byte {
	t.Helper()
	out, err := tr.TransformToStorage(context.Background(), data, value.DefaultContext(key))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(tr value.Transformer, key string, data []byte) ([]byte, bool, error) {
	return tr.TransformFromStorage(context.Background(), data, value.DefaultContext(key))
}

const plain = `{"kind":"Secret","apiVersion":"v1","data":{"password":"aHVudGVyMg=="}}`

func provider(kind, name, secret string) string {
	if kind == "identity" {
		return "      - identity: {}\n"
	}
	return "      - " + kind + ":\n          keys:\n            - name: " + name + "\n              secret: " + secret + "\n"
}

func secretsWith(providers ...string) string {
	return "resources:\n  - resources:\n      - secrets\n    providers:\n" + strings.Join(providers, "")
}

// Each provider stores behind upstream's prefix and the key's name, and
// reads back what it wrote; the identity provider stores as it is.
func TestRoundTripPerProvider(t *testing.T) {
	for _, tc := range []struct{ kind, secret, prefix string }{
		{"aescbc", key32, "k8s:enc:aescbc:v1:key1:"},
		{"aescbc", key16, "k8s:enc:aescbc:v1:key1:"},
		{"aesgcm", key32, "k8s:enc:aesgcm:v1:key1:"},
		{"secretbox", key32, "k8s:enc:secretbox:v1:key1:"},
		{"identity", "", ""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			tr := parse(t, secretsWith(provider(tc.kind, "key1", tc.secret))).TransformerFor(secrets)
			const key = "/registry/secrets/default/x"
			stored := write(t, tr, key, []byte(plain))
			if !bytes.HasPrefix(stored, []byte(tc.prefix)) {
				t.Fatalf("stored %q, want prefix %q", stored, tc.prefix)
			}
			if tc.kind != "identity" && bytes.Contains(stored, []byte("aHVudGVyMg")) {
				t.Fatalf("stored value shows the plain text: %q", stored)
			}
			got, stale, err := read(tr, key, stored)
			if err != nil || stale || string(got) != plain {
				t.Fatalf("read back %q, stale %v, %v", got, stale, err)
			}
		})
	}
}

// aesgcm authenticates the key: a value copied under another key does not
// read, as upstream's.
func TestGCMAuthenticatesKey(t *testing.T) {
	tr := parse(t, secretsWith(provider("aesgcm", "k", key32))).TransformerFor(secrets)
	stored := write(t, tr, "/registry/secrets/default/a", []byte(plain))
	if _, _, err := read(tr, "/registry/secrets/default/b", stored); err == nil {
		t.Fatal("a value moved to another key read back")
	}
}

// The first provider (and its first key) writes; every provider and key
// reads, and a read through any but the first is stale.
func TestFirstWritesAllRead(t *testing.T) {
	const key = "/registry/secrets/ns/s"
	old := parse(t, secretsWith(provider("aescbc", "key1", key32))).TransformerFor(secrets)
	byKey1 := write(t, old, key, []byte(plain))
	gcm := parse(t, secretsWith(provider("aesgcm", "g", key32))).TransformerFor(secrets)
	byGCM := write(t, gcm, key, []byte(plain))

	c := parse(t, secretsWith(
		"      - aescbc:\n          keys:\n            - name: key2\n              secret: "+other+"\n            - name: key1\n              secret: "+key32+"\n",
		provider("aesgcm", "g", key32), provider("identity", "", "")))
	tr := c.TransformerFor(secrets)
	if got := write(t, tr, key, []byte(plain)); !bytes.HasPrefix(got, []byte("k8s:enc:aescbc:v1:key2:")) {
		t.Fatalf("written as %q, want the first key's prefix", got[:24])
	}
	for name, stored := range map[string][]byte{"key1": byKey1, "aesgcm": byGCM, "plain": []byte(plain)} {
		got, stale, err := read(tr, key, stored)
		if err != nil || string(got) != plain || !stale {
			t.Errorf("%s: read %q, stale %v, %v; want the plain value, stale", name, got, stale, err)
		}
	}
	got, stale, err := read(tr, key, write(t, tr, key, []byte(plain)))
	if err != nil || string(got) != plain || stale {
		t.Errorf("own write: read %q, stale %v, %v", got, stale, err)
	}
}

// Without identity in the list, plain values of an encrypted resource do
// not read; resources the configuration does not name, and all resources
// without a configuration, read plain values and refuse encrypted ones.
func TestIdentityFallback(t *testing.T) {
	const key = "/registry/secrets/default/x"
	c := parse(t, secretsWith(provider("aescbc", "key1", key32)))
	if _, _, err := read(c.TransformerFor(secrets), key, []byte(plain)); err == nil || err.Error() != "no matching prefix found" {
		t.Errorf("plain value without identity: %v, want no matching prefix found", err)
	}
	encrypted := write(t, c.TransformerFor(secrets), key, []byte(plain))
	for name, tr := range map[string]value.Transformer{
		"unnamed resource": c.TransformerFor(schema.GroupResource{Resource: "configmaps"}),
		"no config":        (*Config)(nil).TransformerFor(secrets),
	} {
		if got, stale, err := read(tr, key, []byte(plain)); err != nil || stale || string(got) != plain {
			t.Errorf("%s: plain read %q, %v, %v", name, got, stale, err)
		}
		if stored := write(t, tr, key, []byte(plain)); string(stored) != plain {
			t.Errorf("%s: stored %q", name, stored)
		}
		if _, _, err := read(tr, key, encrypted); err == nil || err.Error() != "identity transformer tried to read encrypted data" {
			t.Errorf("%s: encrypted read: %v", name, err)
		}
	}
	// With identity first (decrypting), encrypted values still read
	// through the later provider.
	tr := parse(t, secretsWith(provider("identity", "", ""), provider("aescbc", "key1", key32))).TransformerFor(secrets)
	if got, stale, err := read(tr, key, encrypted); err != nil || !stale || string(got) != plain {
		t.Errorf("identity first: read %q, %v, %v", got, stale, err)
	}
	if stored := write(t, tr, key, []byte(plain)); string(stored) != plain {
		t.Errorf("identity first: stored %q", stored)
	}
}

// A key of the wrong name or the wrong secret gives upstream's errors.
func TestWrongKey(t *testing.T) {
	const key = "/registry/secrets/default/x"
	for _, kind := range []string{"aescbc", "aesgcm", "secretbox"} {
		stored := write(t, parse(t, secretsWith(provider(kind, "key1", key32))).TransformerFor(secrets), key, []byte(plain))
		_, _, err := read(parse(t, secretsWith(provider(kind, "key2", key32))).TransformerFor(secrets), key, stored)
		want := "no matching key was found for the provided AES transformer"
		if kind == "secretbox" {
			want = "no matching key was found for the provided Secretbox transformer"
		}
		if err == nil || err.Error() != want {
			t.Errorf("%s, other name: %v, want %s", kind, err, want)
		}
		got, _, err := read(parse(t, secretsWith(provider(kind, "key1", other))).TransformerFor(secrets), key, stored)
		if err == nil && string(got) == plain {
			t.Errorf("%s, other secret: read the plain value", kind)
		}
		if _, _, err := read(parse(t, secretsWith(provider("identity", "", ""))).TransformerFor(secrets), key, stored); err == nil ||
			err.Error() != "no matching prefix found" {
			// identity's own error is skipped for the next provider; with
			// none left, the list's error is the answer, as upstream.
			t.Errorf("%s, identity only: %v", kind, err)
		}
	}
	gcm := write(t, parse(t, secretsWith(provider("aesgcm", "key1", key32))).TransformerFor(secrets), key, []byte(plain))
	if _, _, err := read(parse(t, secretsWith(provider("aesgcm", "key1", other))).TransformerFor(secrets), key, gcm); err == nil ||
		!strings.Contains(err.Error(), "message authentication failed") {
		t.Errorf("aesgcm, other secret: %v", err)
	}
}

// Rules apply as upstream's: the resource, then its group's wildcard, then
// *.*, and a group-qualified name names its group only.
func TestWildcards(t *testing.T) {
	c := parse(t, `resources:
  - resources: [events]
    providers: [{identity: {}}]
  - resources: [secrets, deployments.apps]
    providers:
      - aescbc: {keys: [{name: a, secret: `+key32+`}]}
  - resources: ['*.apps', '*.']
    providers:
      - aesgcm: {keys: [{name: g, secret: `+key32+`}]}
  - resources: ['*.*']
    providers:
      - secretbox: {keys: [{name: s, secret: `+key32+`}]}
`)
	for gr, want := range map[schema.GroupResource]string{
		{Resource: "secrets"}:                     "k8s:enc:aescbc:v1:a:",
		{Group: "apps", Resource: "deployments"}:  "k8s:enc:aescbc:v1:a:",
		{Group: "apps", Resource: "statefulsets"}: "k8s:enc:aesgcm:v1:g:",
		{Resource: "configmaps"}:                  "k8s:enc:aesgcm:v1:g:",
		{Group: "batch", Resource: "jobs"}:        "k8s:enc:secretbox:v1:s:",
		{Group: "example.com", Resource: "pets"}:  "k8s:enc:secretbox:v1:s:",
		{Resource: "events"}:                      "{",
	} {
		if got := write(t, c.TransformerFor(gr), "/k", []byte(plain)); !bytes.HasPrefix(got, []byte(want)) {
			t.Errorf("%s stored as %.25q, want %s", gr, got, want)
		}
		if !c.Encrypts(gr) && want != "{" {
			t.Errorf("%s: Encrypts false", gr)
		}
	}
	if c.Encrypts(schema.GroupResource{Resource: "events"}) {
		t.Error("events: Encrypts true under identity")
	}
}

// Keys map to their resource's transformer; keys of the direct prefixes,
// and keys of no resource, are not transformed.
func TestForKeys(t *testing.T) {
	c := parse(t, "resources:\n  - resources: ['*.*']\n    providers:\n"+provider("aescbc", "k", key32))
	forKey := c.ForKeys([]schema.GroupResource{
		{Resource: "secrets"}, {Group: "events.k8s.io", Resource: "events"}, {Resource: "events"},
		{Group: "networking.k8s.io", Resource: "ipaddresses"},
	}, "/registry/ipaddresses/")
	for key, want := range map[string]bool{
		"/registry/secrets/default/x":     true,
		"/registry/events/default/e":      true,
		"/registry/ipaddresses/10.96.0.1": false,
		"/registry/ranges/serviceips":     false,
		"/registry/secretsx/a":            false,
		"/other/secrets/a":                false,
	} {
		if got := forKey(key) != nil; got != want {
			t.Errorf("%s: transformed %v, want %v", key, got, want)
		}
	}
	// events takes the core group's rule, whichever comes first.
	c = parse(t, "resources:\n  - resources: [events]\n    providers:\n"+provider("aescbc", "k", key32))
	for _, order := range [][]schema.GroupResource{
		{{Group: "events.k8s.io", Resource: "events"}, {Resource: "events"}},
		{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}},
	} {
		tr := c.ForKeys(order)("/registry/events/default/e")
		if got := write(t, tr, "/registry/events/default/e", []byte(plain)); !bytes.HasPrefix(got, []byte("k8s:enc:aescbc:v1:k:")) {
			t.Errorf("%v: events stored as %.20q", order, got)
		}
	}
}

// Invalid configurations are refused with upstream's messages.
func TestValidationMessages(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{secretsWith(provider("aescbc", "key1", "c2hvcnQ=")),
			`error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 5, expected one of [16 24 32]`},
		{secretsWith(provider("secretbox", "key1", key16)),
			`resources[0].providers[0].secretbox.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 16, expected one of [32]`},
		{secretsWith(provider("aesgcm", "key1", "not base64!")),
			`resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: "REDACTED": secrets must be base64 encoded`},
		{secretsWith("      - aescbc:\n          keys:\n            - name: key1\n"),
			`resources[0].providers[0].aescbc.keys[0].secret: Required value: secret is a mandatory field for a key`},
		{secretsWith("      - aescbc:\n          keys:\n            - secret: " + key32 + "\n"),
			`resources[0].providers[0].aescbc.keys[0].name: Required value: name is a mandatory field for a key`},
		{secretsWith("      - aescbc:\n          keys: []\n"),
			`resources[0].providers[0].aescbc.keys: Required value: at least one keys is required`},
		{secretsWith("      - aescbc:\n          keys:\n            - name: a\n              secret: " + key32 + "\n        identity: {}\n"),
			`more than one provider specified in a single element, should split into different list elements`},
		{secretsWith("      - {}\n"),
			`provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity`},
		{secretsWith("      - rot13: {}\n"),
			`error while parsing file: error decoding encryption provider configuration file "test.yaml": strict decoding error: unknown field "resources[0].providers[0].rot13"`},
		{secretsWith("      - kms:\n          apiVersion: v2\n          name: k\n          endpoint: unix:///kms.sock\n"),
			`resources[0].providers[0].kms: Forbidden: KMS providers are not supported by svcnet: use aescbc, aesgcm, secretbox or identity`},
		{"resources:\n  - resources: [secrets, secrets]\n    providers: [{identity: {}}]\n",
			`resources[0].resources: Invalid value: ["secrets","secrets"]: the same resource cannot be specified multiple times`},
		{"resources:\n  - resources: [secrets, '*.']\n    providers: [{identity: {}}]\n",
			`using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked`},
		{"resources:\n  - resources: ['*.*']\n    providers: [{identity: {}}]\n  - resources: [secrets]\n    providers: [{identity: {}}]\n",
			`error while building transformers: resource "secrets" is masked by earlier rule "*.*"`},
		{"resources:\n  - resources: ['*.apps']\n    providers: [{identity: {}}]\n  - resources: [deployments.apps]\n    providers: [{identity: {}}]\n",
			`resource "deployments.apps" is masked by earlier rule "*.apps"`},
		{"resources:\n  - resources: ['*']\n    providers: [{identity: {}}]\n", starResourceErr},
		{"resources:\n  - resources: [Secrets]\n    providers: [{identity: {}}]\n", resourceNameErr},
		{"resources:\n  - resources: [events.events.k8s.io]\n    providers: [{identity: {}}]\n", eventsGroupErr},
		{"resources:\n  - resources: [secrets.*]\n    providers: [{identity: {}}]\n", resourceAcrossGroupErr},
		{"resources:\n  - resources: [secrets]\n    providers: []\n", `resources[0].providers: Required value: at least one resources[0].providers is required`},
		{"resources: []\n", `resources: Required value: at least one resources is required`},
	} {
		if got := parseErr(t, tc.body); !strings.Contains(got, tc.want) {
			t.Errorf("config:\n%s\ngot:  %s\nwant: %s", tc.body, got, tc.want)
		}
	}
	if _, err := Parse("x.yaml", []byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil ||
		!strings.HasPrefix(err.Error(), `error while parsing file: error decoding encryption provider configuration file "x.yaml": `) {
		t.Errorf("another kind: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	_, err := Load(missing)
	if want := `error while parsing file: error while loading file: error reading encryption provider configuration file "` + missing + `": open ` + missing + `: no such file or directory`; err == nil || err.Error() != want {
		t.Errorf("missing file: %v\nwant %s", err, want)
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); err == nil || !strings.HasSuffix(err.Error(), `encryption provider configuration file "`+empty+`" is empty`) {
		t.Errorf("empty file: %v", err)
	}
}

// The configuration of --encrypt-secrets is written once, mode 0600, and
// kept.
func TestEnsureSecretsConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	path, err := EnsureSecretsConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || filepath.Base(path) != SecretsConfigFile {
		t.Fatalf("%s: %v, %v", path, st.Mode(), err)
	}
	first, _ := os.ReadFile(path)
	again, err := EnsureSecretsConfig(dir)
	if second, _ := os.ReadFile(again); err != nil || again != path || !bytes.Equal(first, second) {
		t.Fatalf("second call: %s, %v; content changed: %v", again, err, !bytes.Equal(first, second))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := write(t, c.TransformerFor(secrets), "/registry/secrets/a/b", []byte(plain)); !bytes.HasPrefix(got, []byte("k8s:enc:aescbc:v1:key1:")) {
		t.Errorf("stored as %.24q", got)
	}
	if _, _, err := read(c.TransformerFor(secrets), "/registry/secrets/a/b", []byte(plain)); err != nil {
		t.Errorf("Secrets stored before do not read: %v", err)
	}
	if c.Encrypts(schema.GroupResource{Resource: "configmaps"}) {
		t.Error("configmaps encrypted")
	}
}
