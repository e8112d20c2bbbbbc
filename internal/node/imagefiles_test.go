package node

import (
	"bytes"
	"context"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/images"
)

// The update-demo images of kubectl's e2e tests run agnhost's
// test-webserver with upstream's data.json and a JPEG picture in /.
func TestUpdateDemoImages(t *testing.T) {
	table := DefaultImages()
	for name, data := range map[string]string{
		"nautilus": "{\n  \"image\": \"nautilus.jpg\"\n}\n",
		"kitten":   "{\n  \"image\": \"kitten.jpg\"\n}\n",
	} {
		c := &corev1.Container{Name: "update-demo", Image: "registry.k8s.io/e2e-test-images/" + name + ":1.8",
			Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}
		cmd, err := table.resolve("/svcnet", c)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"/svcnet", "node", "image", "agnhost", "--ports=80", "--", "/agnhost", "test-webserver"}, cmd.argv); d != "" {
			t.Errorf("%s runs (-want +got):\n%s", name, d)
		}
		files := table[imageName(c.Image)].Files
		if len(files) != 3 || files["/data.json"] != data || !strings.Contains(files["/etc/os-release"], `NAME="Alpine Linux"`) {
			t.Errorf("%s: files %q, want /data.json %q, the picture and agnhost's Alpine /etc/os-release", name, files, data)
		}
		pic, err := jpeg.Decode(bytes.NewReader([]byte(files["/"+name+".jpg"])))
		if err != nil || pic.Bounds().Dx() == 0 {
			t.Errorf("%s.jpg: %v", name, err)
		}
	}
	if again := DefaultImages()["registry.k8s.io/e2e-test-images/kitten"].Files; again["/kitten.jpg"] != table["registry.k8s.io/e2e-test-images/kitten"].Files["/kitten.jpg"] {
		t.Error("the picture differs from one table to the next: the image would be assembled anew")
	}
}

// Under runc an entry's files are in the image the node assembles for it,
// a layer over the program's.
func TestAssembleImageFiles(t *testing.T) {
	store, err := images.Open(t.TempDir(), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{Self: self}, images: store}
	const name = "registry.k8s.io/e2e-test-images/nautilus"
	entry := DefaultImages()[name]
	img, err := a.assemble(context.Background(), name, entry)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range entry.Files {
		if got, err := store.ReadFile(img, p); err != nil || string(got) != want {
			t.Errorf("%s in the image: %d bytes, %v; want %d bytes", p, len(got), err, len(want))
		}
	}
	if _, err := store.ReadFile(img, "/localhost.crt"); err != nil {
		t.Errorf("agnhost's own /localhost.crt: %v", err)
	}
	if len(img.Layers) != 3 {
		t.Errorf("%d layers, want the base, the program and the image's files", len(img.Layers))
	}
}

// A host process gets its image's files bound read-only at their paths,
// but those a volume hides, from one copy on the node.
func TestImageFileMounts(t *testing.T) {
	data := t.TempDir()
	table := ImageTable{"example.com/site": {Builtin: "agnhost", Files: map[string]string{
		"/data.json":           `{"image": "a.jpg"}`,
		"/srv/www/index.html":  "<p>hidden by the volume</p>",
		"/a/b/c.txt":           "c",
		"/etc/svcnet-demo.txt": "etc",
	}}}
	a := &Agent{cfg: Config{DataDir: data, Images: table}, rt: &containerRuntime{dir: filepath.Join(data, "pods")}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	pod.UID = "uid-1"
	c := &corev1.Container{Name: "web", Image: "example.com/site:v1", VolumeMounts: []corev1.VolumeMount{{Name: "www", MountPath: "/srv/"}}}
	mounts, err := a.containerMounts(pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/a/b/c.txt": "c", "/data.json": `{"image": "a.jpg"}`, "/etc/svcnet-demo.txt": "etc"}
	var targets []string
	for _, m := range mounts {
		targets = append(targets, m.Target)
		if m.Target == "/srv/" {
			continue
		}
		if got, err := os.ReadFile(m.Source); err != nil || string(got) != want[m.Target] || !m.ReadOnly {
			t.Errorf("mount %+v: %q, %v; want %q, read-only", m, got, err, want[m.Target])
		}
	}
	if d := cmp.Diff([]string{"/a/b/c.txt", "/data.json", "/etc/svcnet-demo.txt", "/srv/"}, targets); d != "" {
		t.Errorf("mount targets (-want +got):\n%s", d)
	}
	// Another container of the image, without the volume, binds the same
	// copy, the hidden file too.
	again, err := imageFileMounts(data, table, &corev1.Container{Image: "example.com/site"})
	if err != nil || len(again) != 4 || again[0].Source != mounts[0].Source || again[3].Target != "/srv/www/index.html" {
		t.Errorf("the second container's mounts %+v (%v), want those of the same copy", again, err)
	}
	// An image without files, and a container under runc, which has them
	// in its image: no mounts of them.
	if m, err := imageFileMounts(data, DefaultImages(), &corev1.Container{Image: "nginx"}); err != nil || m != nil {
		t.Errorf("nginx: %+v, %v", m, err)
	}
	a.images = &images.Store{}
	if m, err := a.containerMounts(&corev1.Pod{}, &corev1.Container{Image: "example.com/site"}, nil); err != nil || m != nil {
		t.Errorf("under runc: %+v, %v", m, err)
	}
}

// An image table's files are at absolute, clean paths.
func TestLoadImageTableFiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "images.yaml")
	for p, ok := range map[string]bool{"/www/index.html": true, "www/index.html": false, "/www/../../etc/x": false} {
		if err := os.WriteFile(file, []byte("example.com/site: {builtin: agnhost, files: {\""+p+"\": hello}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		table, err := LoadImageTable(file)
		switch {
		case ok && (err != nil || table["example.com/site"].Files[p] != "hello"):
			t.Errorf("%s: %v", p, err)
		case !ok && err == nil:
			t.Errorf("%s: no error", p)
		}
	}
}
