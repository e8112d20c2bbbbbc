package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcnet/svcnet/internal/node/images"
	"github.com/svcnet/svcnet/internal/node/runc"
)

// An image volume (volumes[].image) is an image's root file system,
// read-only: the node makes the image present as it does a container's,
// the image table's assembled image for a name the table holds, else a
// pull as the volume's pullPolicy says (events and back-off as for
// containers), then mounts the overlay of the image's layers, read-only,
// at the volume's directory, which the containers' volumeMounts bind. The
// image garbage collector keeps the image while the pod holds the volume;
// the mount goes with the pod's other volumes. It needs the runc runtime:
// a host process has no image store to take the layers from.

const pluginImage = "kubernetes.io~image"

// setUpImageVolume mounts the image volume v of pod, once.
func (a *Agent) setUpImageVolume(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	if a.images == nil {
		return errors.New("image volumes need the runc runtime")
	}
	dir := a.volumeDir(pod.UID, pluginImage, v.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	img, err := a.volumeImage(ctx, pod, v.Image)
	if err != nil {
		return err
	}
	release := a.imageGC.hold(img.ID, time.Now())
	empty := filepath.Join(a.rt.podDir(string(pod.UID)), "volumes", "empty-layer")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		release()
		return err
	}
	if err := runc.MountLayers(dir, a.images.LayerDirs(img), empty); err != nil {
		release()
		return fmt.Errorf("mount image %q: %w", v.Image.Reference, err)
	}
	a.volumes.mu.Lock()
	a.volumes.imageHolds[pod.UID] = append(a.volumes.imageHolds[pod.UID], release)
	a.volumes.mu.Unlock()
	return nil
}

// volumeImage makes the image of an image volume present.
func (a *Agent) volumeImage(ctx context.Context, pod *corev1.Pod, src *corev1.ImageVolumeSource) (*images.Image, error) {
	if entry, mapped := a.cfg.Images[imageName(src.Reference)]; mapped {
		return a.localImage(ctx, imageName(src.Reference), entry)
	}
	img, _, err := a.ensureImage(ctx, pod, &corev1.Container{Image: src.Reference, ImagePullPolicy: src.PullPolicy})
	return img, err
}

// releaseVolumeImages lets the image garbage collector have the images of
// a pod's image volumes, once they are unmounted.
func (m *volumeManager) releaseVolumeImages(uid types.UID) {
	m.mu.Lock()
	holds := m.imageHolds[uid]
	delete(m.imageHolds, uid)
	m.mu.Unlock()
	for _, release := range holds {
		release()
	}
}
