package node

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/node/images"
)

func TestImageGC(t *testing.T) {
	store, err := images.Open(t.TempDir(), images.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := []images.File{{Path: "/etc/passwd", Data: []byte("root:x:0:0::/root:/bin/sh\n")}}
	assemble := func(name string, labels map[string]string) *images.Image {
		img, err := store.Assemble(context.Background(), "localhost/"+name, "1", v1.Config{Labels: labels}, base,
			[]images.File{{Path: "/" + name, Data: []byte(strings.Repeat(name, 1000))}})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	oldest, inUse, newer := assemble("a", nil), assemble("b", nil), assemble("c", nil)
	pinned := assemble("p", map[string]string{localImageLabel: "p"})
	young := assemble("d", nil)

	var available, capacity uint64 = 100, 1000
	statfs := func(st *unix.Statfs_t) error {
		*st = unix.Statfs_t{Blocks: capacity, Bavail: available, Bsize: 1}
		return nil
	}
	g := newImageGC(ImageGC{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Minute, Period: time.Minute}, store, statfs,
		func() (map[string]bool, error) { return map[string]bool{inUse.ID: true}, nil },
		func() map[string]bool { return map[string]bool{pinned.ID: true} })
	now := time.Now()
	// First seen ten minutes ago; last used as given. The young image was
	// first seen less than the minimum age ago.
	for img, used := range map[*images.Image]time.Duration{oldest: 10 * time.Minute, pinned: 10 * time.Minute, inUse: 9 * time.Minute, newer: 5 * time.Minute} {
		g.detected[img.ID], g.lastUsed[img.ID] = now.Add(-10*time.Minute), now.Add(-used)
	}
	g.detected[young.ID], g.lastUsed[young.ID] = now.Add(-30*time.Second), now.Add(-30*time.Second)
	ownLayer := store.LayerDirs(oldest)[0] // its topmost layer, its own

	// 90% used: 100 bytes to free to be down to 80%; the least recently
	// used image is more than that.
	freed, err := g.collect(now)
	if err != nil || freed != oldest.Size {
		t.Fatalf("collect: freed %d, %v; want %d", freed, err, oldest.Size)
	}
	present := func(img *images.Image) bool {
		_, err := store.Lookup("localhost/" + strings.TrimPrefix(img.RepoTags[0], "localhost/"))
		return err == nil
	}
	if present(oldest) || !present(newer) || !present(inUse) || !present(pinned) || !present(young) {
		t.Errorf("after the collection: oldest %v newer %v in use %v pinned %v young %v; want the oldest alone gone",
			present(oldest), present(newer), present(inUse), present(pinned), present(young))
	}
	if _, err := os.Stat(ownLayer); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed image's own layer: %v, want it gone", err)
	}
	for _, dir := range store.LayerDirs(newer) {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("a layer of a kept image went: %v", err)
		}
	}

	// Below the high threshold: nothing goes.
	available = 200
	if freed, err := g.collect(now); freed != 0 || err != nil {
		t.Errorf("below the threshold: freed %d, %v", freed, err)
	}
	// A container being made from an image holds it.
	release := g.hold(newer.ID, now)
	available, capacity = 0, 100000
	if freed, _ := g.collect(now); freed != 0 {
		t.Errorf("collected %d bytes with the only candidate held", freed)
	}
	release()
	// Full: all that may go goes, and the shortfall is the kubelet's error.
	freed, err = g.collect(now)
	if freed != newer.Size || err == nil || !strings.Contains(err.Error(), "Failed to garbage collect required amount of images. Attempted to free 20000 bytes") {
		t.Errorf("full: freed %d (want %d), %v", freed, newer.Size, err)
	}
	if _, err := store.Lookup(newer.RepoTags[0]); !errors.Is(err, images.ErrNotFound) {
		t.Errorf("newer image after the second collection: %v", err)
	}
	if !present(inUse) || !present(pinned) || !present(young) {
		t.Error("an image in use, pinned or younger than the minimum age was collected")
	}
	// 100% disables the collection.
	g.policy.HighThresholdPercent = 100
	if freed, err := g.collect(now); freed != 0 || err != nil {
		t.Errorf("disabled: freed %d, %v", freed, err)
	}
}

func TestImageGCValidate(t *testing.T) {
	for _, c := range []struct {
		high, low int
		want      string
	}{
		{85, 80, ""},
		{100, 99, ""},
		{100, 100, "must be less than"},
		{101, 80, "imageGCHighThresholdPercent (--image-gc-high-threshold) 101 must be between 0 and 100"},
		{80, 85, "imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 80"},
		{80, -1, "must be between 0 and 100"},
	} {
		err := ImageGC{HighThresholdPercent: c.high, LowThresholdPercent: c.low, Period: time.Minute}.Validate()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("high %d low %d: %v, want %q", c.high, c.low, err, c.want)
		}
	}
}
