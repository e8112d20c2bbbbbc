package volume

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// visible lists what a user of the volume sees, following the links.
func visible(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		err := filepath.WalkDir(filepath.Join(dir, e.Name()), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Stat(p)
			if err != nil {
				return err
			}
			if info.IsDir() {
				if d.Type()&fs.ModeSymlink != 0 {
					// WalkDir does not descend through a link.
					sub := visible(t, p)
					for k, v := range sub {
						rel, _ := filepath.Rel(dir, filepath.Join(p, k))
						out[rel] = v
					}
				}
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b) + " " + info.Mode().Perm().String()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func generations(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var gens []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") && e.IsDir() {
			gens = append(gens, e.Name())
		}
	}
	return gens
}

func TestWriteLayoutAndUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	changed, err := Write(dir, map[string]File{
		"color":         {Data: []byte("blue"), Mode: 0o644},
		"nested/a/file": {Data: []byte("x"), Mode: 0o400},
	})
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	gen, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(gen, "..") {
		t.Fatalf("..data links to %q (%v), want a timestamped generation", gen, err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "color")); l != "..data/color" {
		t.Errorf("color links to %q, want ..data/color", l)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "nested")); l != "..data/nested" {
		t.Errorf("nested links to %q, want ..data/nested", l)
	}
	want := map[string]string{"color": "blue -rw-r--r--", "nested/a/file": "x -r--------"}
	if got := visible(t, dir); !maps.Equal(got, want) {
		t.Errorf("volume holds %v, want %v", got, want)
	}

	// The same payload again: nothing is written.
	changed, err = Write(dir, map[string]File{
		"color":         {Data: []byte("blue"), Mode: 0o644},
		"nested/a/file": {Data: []byte("x"), Mode: 0o400},
	})
	if err != nil || changed {
		t.Fatalf("same payload: changed=%v err=%v", changed, err)
	}

	// A changed value and a removed key: a new generation, the old one
	// gone, the removed key's link gone.
	changed, err = Write(dir, map[string]File{"color": {Data: []byte("red"), Mode: 0o644}})
	if err != nil || !changed {
		t.Fatalf("update: changed=%v err=%v", changed, err)
	}
	if got := visible(t, dir); !maps.Equal(got, map[string]string{"color": "red -rw-r--r--"}) {
		t.Errorf("after update the volume holds %v", got)
	}
	gens := generations(t, dir)
	if len(gens) != 1 || gens[0] == gen {
		t.Errorf("generations after update %v, want one new one (old %s)", gens, gen)
	}

	// Only a mode change is a change too.
	if changed, err := Write(dir, map[string]File{"color": {Data: []byte("red"), Mode: 0o400}}); err != nil || !changed {
		t.Fatalf("mode change: changed=%v err=%v", changed, err)
	}
	if got := visible(t, dir); got["color"] != "red -r--------" {
		t.Errorf("after a mode change: %v", got)
	}
}

// A reader holding the old generation's file keeps reading whole old
// content while the swap happens (what a subPath bind mount holds).
func TestWriteKeepsOldFileForHolders(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(dir, map[string]File{"k": {Data: []byte("old"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := Write(dir, map[string]File{"k": {Data: []byte("new"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	n, _ := f.Read(b)
	if string(b[:n]) != "old" {
		t.Errorf("open file reads %q after the swap, want old", b[:n])
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "k")); string(b) != "new" {
		t.Errorf("the path reads %q after the swap, want new", b)
	}
}

func TestWriteRejectsEscapingPaths(t *testing.T) {
	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "..data", strings.Repeat("a", 256)} {
		if _, err := Write(t.TempDir(), map[string]File{p: {Data: []byte("x"), Mode: 0o644}}); err == nil {
			t.Errorf("path %q was accepted", p)
		}
	}
}

func TestConfigMapAndSecretProjection(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	files, err := ConfigMap(&corev1.ConfigMapVolumeSource{}, cm)
	if err != nil || len(files) != 3 || string(files["a"].Data) != "1" || files["bin"].Mode != 0o644 {
		t.Errorf("all keys: %v %v", files, err)
	}
	files, err = ConfigMap(&corev1.ConfigMapVolumeSource{
		DefaultMode: ptr.To[int32](0o440),
		Items:       []corev1.KeyToPath{{Key: "a", Path: "dir/a.conf"}, {Key: "b", Path: "b", Mode: ptr.To[int32](0o600)}},
	}, cm)
	if err != nil || len(files) != 2 || files["dir/a.conf"].Mode != 0o440 || files["b"].Mode != 0o600 {
		t.Errorf("items: %v %v", files, err)
	}
	_, err = ConfigMap(&corev1.ConfigMapVolumeSource{Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}, cm)
	if err == nil || err.Error() != "configmap references non-existent config key: nope" {
		t.Errorf("missing key: %v", err)
	}
	files, err = ConfigMap(&corev1.ConfigMapVolumeSource{Optional: ptr.To(true), Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}, cm)
	if err != nil || len(files) != 0 {
		t.Errorf("optional missing key: %v %v", files, err)
	}

	sec := &corev1.Secret{Data: map[string][]byte{"password": []byte("s3cret")}}
	files, err = Secret(&corev1.SecretVolumeSource{DefaultMode: ptr.To[int32](0o400)}, sec)
	if err != nil || string(files["password"].Data) != "s3cret" || files["password"].Mode != 0o400 {
		t.Errorf("secret: %v %v", files, err)
	}
	_, err = Secret(&corev1.SecretVolumeSource{Items: []corev1.KeyToPath{{Key: "user", Path: "u"}}}, sec)
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "user") {
		t.Errorf("missing secret key: %v", err)
	}
}

func TestProjected(t *testing.T) {
	src := &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o444),
		Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"},
				Items: []corev1.KeyToPath{{Key: "k", Path: "secret/k", Mode: ptr.To[int32](0o400)}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{PodCertificate: &corev1.PodCertificateProjection{CredentialBundlePath: "bundle.pem"}},
			{PodCertificate: &corev1.PodCertificateProjection{KeyPath: "tls.key", CertificateChainPath: "tls.crt"}},
		},
	}
	s := Sources{
		ConfigMaps: map[string]*corev1.ConfigMap{"cm": {Data: map[string]string{"c": "v"}}},
		Secrets:    map[string]*corev1.Secret{"sec": {Data: map[string][]byte{"k": []byte("v")}}},
		Field: func(it corev1.DownwardAPIVolumeFile) (string, error) {
			return "pod-" + it.FieldRef.FieldPath, nil
		},
		Tokens: map[string][]byte{"token": []byte("placeholder")},
		PodCertificates: map[int]Credentials{
			4: {Key: []byte("key1;"), Chain: []byte("leaf1;ca")},
			5: {Key: []byte("key2;"), Chain: []byte("leaf2;ca")},
		},
	}
	files, err := Projected(src, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for p, f := range files {
		got = append(got, p+"="+string(f.Data)+" "+f.Mode.String())
	}
	slices.Sort(got)
	// A credential bundle is the key, then the chain.
	want := []string{"bundle.pem=key1;leaf1;ca -r--r--r--", "c=v -r--r--r--", "name=pod-metadata.name -r--r--r--", "secret/k=v -r--------",
		"tls.crt=leaf2;ca -r--r--r--", "tls.key=key2; -r--r--r--", "token=placeholder -r--r--r--"}
	if !slices.Equal(got, want) {
		t.Errorf("projected files %v, want %v", got, want)
	}
	delete(s.Secrets, "sec")
	if _, err := Projected(src, s); err == nil || err.Error() != `secret "sec" not found` {
		t.Errorf("missing secret: %v", err)
	}
}

func TestSubPath(t *testing.T) {
	vol := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(vol, "escape")); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(filepath.Join(vol, "cm"), map[string]File{"key": {Data: []byte("v"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	got, err := SubPath(vol, "new/dir")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(got); err != nil || !info.IsDir() || !strings.HasPrefix(got, vol) {
		t.Errorf("subPath new/dir resolved to %s (%v), want a new directory in the volume", got, err)
	}
	// A projected key resolves into the current generation.
	got, err = SubPath(vol, "cm/key")
	if err != nil || !strings.Contains(got, "/cm/..") {
		t.Errorf("subPath cm/key resolved to %s (%v)", got, err)
	}
	for _, bad := range []string{"/etc", "../x", "escape", "escape/sub"} {
		if p, err := SubPath(vol, bad); err == nil {
			t.Errorf("subPath %q accepted as %s", bad, p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("subPath created %v outside the volume", entries)
	}
}
