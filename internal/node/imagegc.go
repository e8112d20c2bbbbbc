package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/node/images"
)

// Image garbage collection, as the kubelet's image manager does it: every
// period, when the image file system (the data dir's) is used above the
// high threshold, the images that no container of the node uses and that
// have not been used for the minimum age are deleted, least recently used
// first, until its usage is down to the low threshold. The images the node
// assembles (the image table's) and uses are pinned, as the kubelet pins
// the sandbox image. An image counts its minimum age from when the node
// first saw it.

// ImageGC configures the image garbage collector.
type ImageGC struct {
	// HighThresholdPercent and LowThresholdPercent are the kubelet's
	// --image-gc-high-threshold and --image-gc-low-threshold; 100
	// disables the collection.
	HighThresholdPercent int
	LowThresholdPercent  int
	// MinAge is the kubelet's --minimum-image-ttl-duration.
	MinAge time.Duration
	// Period is how often usage is checked (the kubelet's is 5 minutes).
	Period time.Duration
}

// DefaultImageGC is the kubelet's defaults.
func DefaultImageGC() ImageGC {
	return ImageGC{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, Period: 5 * time.Minute}
}

// Validate refuses thresholds the kubelet refuses.
func (g ImageGC) Validate() error {
	switch {
	case g.HighThresholdPercent < 0 || g.HighThresholdPercent > 100:
		return fmt.Errorf("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", g.HighThresholdPercent)
	case g.LowThresholdPercent < 0 || g.LowThresholdPercent > 100:
		return fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", g.LowThresholdPercent)
	case g.LowThresholdPercent >= g.HighThresholdPercent:
		return fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d", g.LowThresholdPercent, g.HighThresholdPercent)
	case g.Period <= 0:
		return fmt.Errorf("invalid configuration: the image garbage collection period %s must be positive", g.Period)
	}
	return nil
}

// imageGC collects a store's images.
type imageGC struct {
	policy ImageGC
	store  *images.Store
	// statfs reads the image file system's usage.
	statfs func(st *unix.Statfs_t) error
	// inUse lists the IDs of the images the node's containers use;
	// pinned those of the images it assembled and keeps using.
	inUse  func() (map[string]bool, error)
	pinned func() map[string]bool

	mu sync.Mutex
	// holds counts, by image ID, the containers being made from each
	// image, which have no run on disk yet.
	holds map[string]int
	// detected is when each image was first seen, lastUsed when it was
	// last seen in use (or first seen).
	detected, lastUsed map[string]time.Time
	// failed says the last collection failed.
	failed bool
}

func newImageGC(policy ImageGC, store *images.Store, statfs func(*unix.Statfs_t) error, inUse func() (map[string]bool, error), pinned func() map[string]bool) *imageGC {
	return &imageGC{policy: policy, store: store, statfs: statfs, inUse: inUse, pinned: pinned,
		holds: map[string]int{}, detected: map[string]time.Time{}, lastUsed: map[string]time.Time{}}
}

// hold keeps image id from the collector while a container is made from
// it, until the returned release.
func (g *imageGC) hold(id string, now time.Time) (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds[id]++
	g.lastUsed[id] = now
	if _, ok := g.detected[id]; !ok {
		g.detected[id] = now
	}
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.holds[id]--; g.holds[id] <= 0 {
			delete(g.holds, id)
		}
	}
}

// detect notes the images in the store and those in use at now, as the
// kubelet's image manager does on each pass.
func (g *imageGC) detect(now time.Time) ([]*images.Image, map[string]bool, error) {
	all, err := g.store.List()
	if err != nil {
		return nil, nil, err
	}
	inUse, err := g.inUse()
	if err != nil {
		return nil, nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	maps.Copy(inUse, g.pinned())
	for id := range g.holds {
		inUse[id] = true
	}
	known := map[string]bool{}
	for _, img := range all {
		known[img.ID] = true
		if _, ok := g.detected[img.ID]; !ok {
			g.detected[img.ID], g.lastUsed[img.ID] = now, now
		}
		if inUse[img.ID] {
			g.lastUsed[img.ID] = now
		}
	}
	for id := range g.detected {
		if !known[id] && g.holds[id] == 0 {
			delete(g.detected, id)
			delete(g.lastUsed, id)
		}
	}
	return all, inUse, nil
}

// collect frees space as the policy says, when usage is above the high
// threshold: it returns the bytes freed, and an error when it could not
// free what it had to.
func (g *imageGC) collect(now time.Time) (int64, error) {
	if g.policy.HighThresholdPercent >= 100 {
		return 0, nil
	}
	all, inUse, err := g.detect(now)
	if err != nil {
		return 0, err
	}
	var st unix.Statfs_t
	if err := g.statfs(&st); err != nil {
		return 0, fmt.Errorf("read the image file system's usage: %w", err)
	}
	capacity := int64(st.Blocks) * st.Bsize
	available := int64(st.Bavail) * st.Bsize
	if capacity <= 0 {
		return 0, nil
	}
	usagePercent := 100 - int(available*100/capacity)
	if usagePercent < g.policy.HighThresholdPercent {
		return 0, nil
	}
	toFree := capacity*int64(100-g.policy.LowThresholdPercent)/100 - available

	g.mu.Lock()
	var candidates []*images.Image
	for _, img := range all {
		// Not in use now, seen before this pass, and first seen at
		// least the minimum age ago.
		if first := g.detected[img.ID]; !inUse[img.ID] && first.Before(now) && now.Sub(first) >= g.policy.MinAge {
			candidates = append(candidates, img)
		}
	}
	slices.SortStableFunc(candidates, func(a, b *images.Image) int { return g.lastUsed[a.ID].Compare(g.lastUsed[b.ID]) })
	g.mu.Unlock()
	var freed int64
	for _, img := range candidates {
		if freed >= toFree {
			break
		}
		if !g.removable(img.ID) {
			continue
		}
		n, err := g.store.Remove(img.ID)
		if err != nil {
			return freed, fmt.Errorf("remove image %s: %w", img.ID, err)
		}
		slog.Info("image garbage collection: removed image", "image", cmp.Or(slices.Concat(img.RepoTags, img.RepoDigests, []string{img.ID})...), "size", n)
		freed += n
	}
	if freed < toFree {
		return freed, fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", toFree, freed)
	}
	return freed, nil
}

// removable says no container is being made from image id since the
// candidates were chosen.
func (g *imageGC) removable(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holds[id] == 0
}

// collectImages runs the collector every period until ctx ends; a
// failure twice in a row is an ImageGCFailed event on the Node, as the
// kubelet records it.
func (a *Agent) collectImages(ctx context.Context) {
	t := time.NewTicker(a.imageGC.policy.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			_, err := a.imageGC.collect(now)
			if err != nil {
				slog.Warn("image garbage collection", "err", err)
				if a.imageGC.failed {
					a.recorder.Event(a.nodeRef(), corev1.EventTypeWarning, "ImageGCFailed", err.Error())
				}
			}
			a.imageGC.failed = err != nil
		}
	}
}

// imagesInUse are the IDs of the images of the containers on the node,
// running or not, as long as their pods are there.
func (a *Agent) imagesInUse() (map[string]bool, error) {
	uids, err := a.rt.pods()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, uid := range uids {
		runs, err := a.rt.containers(uid)
		if err != nil {
			return nil, err
		}
		for _, c := range runs {
			if c.Spec.OCI == nil {
				continue
			}
			img, err := a.images.Lookup(c.Spec.ImageRef)
			if errors.Is(err, images.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[img.ID] = true
		}
	}
	return out, nil
}
