package storage_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
	"github.com/svcnet/svcnet/internal/storage/encryption"
	"github.com/svcnet/svcnet/internal/storage/storagetest"
)

const (
	key1 = "c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/Pz8/Pz8="
	key2 = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY="
)

// resources are what the API server stores, for the key mapping.
var resources = []schema.GroupResource{{Resource: "secrets"}, {Resource: "configmaps"}}

func config(t *testing.T, providers string) *encryption.Config {
	t.Helper()
	c, err := encryption.Parse("test.yaml", []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
`+providers))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func aescbc(keys ...string) string {
	s := "      - aescbc:\n          keys:\n"
	for _, k := range keys {
		name, secret, _ := strings.Cut(k, "=")
		s += "            - {name: " + name + ", secret: " + secret + "}\n"
	}
	return s
}

func newStore(t *testing.T, c *encryption.Config) *storage.Store {
	t.Helper()
	s := storage.New(storagetest.Start(t), registry.JSONCodec{})
	s.SetTransformers(storage.Transformers(c.ForKeys(resources)))
	return s
}

func secret(name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string][]byte{"password": []byte(value)}}
}

func raw(t *testing.T, s *storage.Store, key string) string {
	t.Helper()
	resp, err := s.Client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(resp.Kvs[0].Value)
}

func password(t *testing.T, obj any) string {
	t.Helper()
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		t.Fatalf("got %T", obj)
	}
	return string(sec.Data["password"])
}

// Every path of the store encrypts on the way to etcd and decrypts on
// the way back: create, update, get, list, watch and delete; other
// resources are stored as they are.
func TestStoreEncrypts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, config(t, aescbc("key1="+key1)))
	const key = "/registry/secrets/default/db"
	from, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events := s.Watch(ctx, "/registry/secrets/", from+1)
	created, err := s.Create(ctx, key, secret("db", "hunter2"), storage.Extra{})
	if err != nil {
		t.Fatal(err)
	}
	if v := raw(t, s, key); !strings.HasPrefix(v, "k8s:enc:aescbc:v1:key1:") || strings.Contains(v, "aHVudGVyMg") {
		t.Fatalf("stored %q", v)
	}
	got, err := s.Get(ctx, key)
	if err != nil || password(t, got) != "hunter2" {
		t.Fatalf("get: %v", err)
	}
	rev, _ := strconv.ParseInt(created.(*corev1.Secret).ResourceVersion, 10, 64)
	if _, err := s.Update(ctx, key, secret("db", "hunter3"), rev, storage.Extra{}); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx, "/registry/secrets/", storage.ListOptions{})
	if err != nil || len(list.Items) != 1 || password(t, list.Items[0]) != "hunter3" {
		t.Fatalf("list: %v %v", list, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}, Data: map[string]string{"a": "b"}}
	if _, err := s.Create(ctx, "/registry/configmaps/default/c", cm, storage.Extra{}); err != nil {
		t.Fatal(err)
	}
	if v := raw(t, s, "/registry/configmaps/default/c"); !strings.HasPrefix(v, "{") {
		t.Errorf("configmap stored %q", v)
	}
	cur, _ := s.Get(ctx, key)
	rev, _ = strconv.ParseInt(cur.(*corev1.Secret).ResourceVersion, 10, 64)
	deleted, err := s.Delete(ctx, key, rev, storage.Extra{})
	if err != nil || password(t, deleted) != "hunter3" {
		t.Fatalf("delete: %v", err)
	}
	for i, want := range []struct {
		typ      watch.EventType
		password string
	}{{watch.Added, "hunter2"}, {watch.Modified, "hunter3"}, {watch.Deleted, "hunter3"}} {
		select {
		case e := <-events:
			if e.Err != nil || e.Type != want.typ || password(t, e.Object) != want.password {
				t.Fatalf("event %d: %+v, want %s %s", i, e, want.typ, want.password)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event %d", i)
		}
	}
}

// Reads through another key than the writing one are stale at that
// revision, until the object is written again; wrong keys give upstream's
// errors, a list's naming the key.
func TestStoreStaleAndErrors(t *testing.T) {
	ctx := context.Background()
	cli := storagetest.Start(t)
	old := storage.New(cli, registry.JSONCodec{})
	old.SetTransformers(storage.Transformers(config(t, aescbc("key1="+key1)).ForKeys(resources)))
	const key = "/registry/secrets/default/db"
	if _, err := old.Create(ctx, key, secret("db", "hunter2"), storage.Extra{}); err != nil {
		t.Fatal(err)
	}

	rotated := storage.New(cli, registry.JSONCodec{})
	rotated.SetTransformers(storage.Transformers(config(t, aescbc("key2="+key2, "key1="+key1)).ForKeys(resources)))
	got, err := rotated.Get(ctx, key)
	if err != nil || password(t, got) != "hunter2" {
		t.Fatalf("get with key1 second: %v", err)
	}
	rev, _ := strconv.ParseInt(got.(*corev1.Secret).ResourceVersion, 10, 64)
	if !rotated.Stale(key, rev) || rotated.Stale(key, rev+1) || old.Stale(key, rev) {
		t.Fatalf("stale at %d: %v; at %d: %v; through the old store: %v", rev, rotated.Stale(key, rev), rev+1, rotated.Stale(key, rev+1), old.Stale(key, rev))
	}
	out, err := rotated.Update(ctx, key, got, rev, storage.Extra{})
	if err != nil {
		t.Fatal(err)
	}
	if v := raw(t, rotated, key); !strings.HasPrefix(v, "k8s:enc:aescbc:v1:key2:") {
		t.Fatalf("rewritten as %.24q", v)
	}
	newRev, _ := strconv.ParseInt(out.(*corev1.Secret).ResourceVersion, 10, 64)
	if _, err := rotated.Get(ctx, key); err != nil || rotated.Stale(key, rev) || rotated.Stale(key, newRev) {
		t.Fatalf("after the rewrite: %v, stale %v %v", err, rotated.Stale(key, rev), rotated.Stale(key, newRev))
	}

	// The old store, with key1 only, cannot read key2's value.
	_, err = old.Get(ctx, key)
	if err == nil || err.Error() != "no matching key was found for the provided AES transformer" {
		t.Errorf("get without the key: %v", err)
	}
	_, err = old.List(ctx, "/registry/secrets/", storage.ListOptions{})
	if want := `unable to transform key "` + key + `": no matching key was found for the provided AES transformer`; err == nil || err.Error() != want {
		t.Errorf("list without the key: %v\nwant %s", err, want)
	}
	// Without any configuration the identity transformer refuses it.
	none := storage.New(cli, registry.JSONCodec{})
	none.SetTransformers(storage.Transformers((*encryption.Config)(nil).ForKeys(resources)))
	if _, err := none.Get(ctx, key); err == nil || err.Error() != "identity transformer tried to read encrypted data" {
		t.Errorf("get without a configuration: %v", err)
	}
	events := none.Watch(ctx, "/registry/secrets/", newRev)
	select {
	case e := <-events:
		if e.Err == nil || !strings.Contains(e.Err.Error(), "identity transformer tried to read encrypted data") {
			t.Errorf("watch without a configuration: %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Error("no watch event")
	}
}
