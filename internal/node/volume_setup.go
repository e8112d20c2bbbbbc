package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/node/objectcache"
	"github.com/svcnet/svcnet/internal/node/podcertificate"
	"github.com/svcnet/svcnet/internal/node/token"
	"github.com/svcnet/svcnet/internal/node/trustbundle"
	"github.com/svcnet/svcnet/internal/node/volume"
	"github.com/svcnet/svcnet/internal/podutil"
)

// Volumes, as the kubelet's volume manager prepares them: each pod volume
// gets a directory under the pod's, <pod>/volumes/<plugin>/<name>, which
// every container that mounts it bind-mounts at its mountPath (the shim
// does that inside the container's own mount namespace). hostPath volumes
// are the host's path itself; a claim's volume is its PersistentVolume's
// hostPath or local path, else a directory of the PV under the node's data
// dir. emptyDir with medium Memory and the secret, downwardAPI and
// projected volumes are tmpfs mounts (as upstream, so secrets stay off the
// disk), the only mounts the agent makes outside a container; they are
// unmounted when the pod goes.
//
// ConfigMap, Secret, downwardAPI and projected volumes are written with the
// atomic writer on every sync of the pod: when an object changes (each
// watched on its own while a pod uses it, as the Node authorizer lets a
// node read only those; a change pokes the pods that use it) and at least
// every volumeResync. Claims and their volumes are read when a pod's
// volumes are set up (the Node authorizer lets a node get them, not watch
// them); a claim not bound yet is tried again after volumeRetry. A
// podCertificate source's key and certificate come from the pod
// certificate manager (internal/node/podcertificate), which each sync
// tells of the pod: until its signer has issued them the volume fails and
// is tried again after volumeRetry, and the manager pokes the pod as soon
// as they are issued or replaced.

const (
	// volumeResync re-projects a pod's ConfigMap, Secret and downward API
	// volumes, the kubelet's sync period (one minute upstream) made short.
	volumeResync = 15 * time.Second
	// volumeRetry is the wait before trying to set up a failed volume again.
	volumeRetry = 2 * time.Second
)

// volumeManager reads the objects volumes project and remembers which
// pods' volumes are set up.
type volumeManager struct {
	configMaps, secrets *objectcache.Cache
	client              kubernetes.Interface
	// pvDir holds the directories of PVs with no path of their own.
	pvDir string
	// tokens are the service account tokens projections hold.
	tokens *token.Manager
	// trustBundles are the ClusterTrustBundles projections hold.
	trustBundles *trustbundle.Manager
	// podCerts are the credentials of the podCertificate projections.
	podCerts *podcertificate.Manager

	mu sync.Mutex
	// failed holds each pod's volumes that the last set-up did not
	// prepare, with the reason.
	failed map[types.UID]error
	// owned are each pod's volumes given to its fsGroup already.
	owned map[types.UID]map[string]bool
	// imageHolds release the images of each pod's image volumes.
	imageHolds map[types.UID][]func()
}

// watchVolumeSources prepares the watches of what volumes project; each
// change pokes the pods that use the object. The pod certificate manager
// is made here and run by the agent.
func (a *Agent) watchVolumeSources(ctx context.Context) error {
	podCerts, err := podcertificate.New(ctx, podcertificate.Config{Client: a.client, NodeName: a.cfg.NodeName,
		Nodes: a.nodeLister, Pods: a.podLister, Recorder: a.recorder, Changed: func(p *corev1.Pod) { a.podChanged(p) }})
	if err != nil {
		return err
	}
	core := a.client.CoreV1()
	a.volumes = &volumeManager{
		client: a.client,
		configMaps: objectcache.New(ctx, objectcache.SourceOf(corev1.Resource("configmap"), &corev1.ConfigMap{}, a.client,
			func(ns string) objectcache.Namespaced[*corev1.ConfigMap, *corev1.ConfigMapList] {
				return core.ConfigMaps(ns)
			}),
			a.volumeSourceChanged(podutil.VolumeConfigMaps)),
		secrets: objectcache.New(ctx, objectcache.SourceOf(corev1.Resource("secret"), &corev1.Secret{}, a.client,
			func(ns string) objectcache.Namespaced[*corev1.Secret, *corev1.SecretList] { return core.Secrets(ns) }),
			a.volumeSourceChanged(podutil.VolumeSecrets)),
		pvDir:        filepath.Join(a.cfg.DataDir, "pv"),
		tokens:       token.New(a.client),
		trustBundles: trustbundle.New(ctx, a.client),
		podCerts:     podCerts,
		failed:       map[types.UID]error{},
		owned:        map[types.UID]map[string]bool{},
		imageHolds:   map[types.UID][]func(){},
	}
	return nil
}

// volumeSourceChanged pokes the pods whose volumes (named by uses) read
// the object.
func (a *Agent) volumeSourceChanged(uses func(*corev1.Pod) []string) func(ns, name string) {
	return func(ns, name string) {
		for _, p := range listPods(a.podLister) {
			if p.Namespace == ns && slices.Contains(uses(p), name) {
				a.podChanged(p)
			}
		}
	}
}

// Volume plugin directory names, as the kubelet's.
const (
	pluginEmptyDir  = "kubernetes.io~empty-dir"
	pluginConfigMap = "kubernetes.io~configmap"
	pluginSecret    = "kubernetes.io~secret"
	pluginDownward  = "kubernetes.io~downward-api"
	pluginProjected = "kubernetes.io~projected"
)

func (a *Agent) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(a.rt.podDir(string(uid)), "volumes", plugin, name)
}

// claimError is a volume whose claim cannot be used yet; upstream's volume
// manager reports it in its own words.
type claimError struct {
	pod   *corev1.Pod
	claim string
	err   error
}

func (e *claimError) Error() string {
	return fmt.Sprintf("error processing PVC %s/%s: %v", e.pod.Namespace, e.claim, e.err)
}

// setUpVolumes prepares or refreshes every volume of the pod, recording a
// FailedMount event for each that fails; it returns when the pod wants
// its next sync for its volumes' sake.
func (a *Agent) setUpVolumes(pod *corev1.Pod) time.Duration {
	a.volumes.configMaps.Register(pod.UID, pod.Namespace, podutil.VolumeConfigMaps(pod))
	a.volumes.secrets.Register(pod.UID, pod.Namespace, podutil.VolumeSecrets(pod))
	a.volumes.podCerts.Track(pod)
	var errs []error
	refresh := false
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil {
			refresh = true
		}
		err := a.setUpVolume(pod, v)
		if err == nil {
			continue
		}
		errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
		if errors.Is(err, errNotAttached) {
			continue
		}
		if ce, ok := errors.AsType[*claimError](err); ok {
			a.event(pod, "", corev1.EventTypeWarning, "FailedMount", fmt.Sprintf(
				"Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[], failed to process volumes=[%s]: %v",
				v.Name, v.Name, ce))
			continue
		}
		a.event(pod, "", corev1.EventTypeWarning, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
	}
	a.volumes.mu.Lock()
	if len(errs) > 0 {
		a.volumes.failed[pod.UID] = errors.Join(errs...)
	} else {
		delete(a.volumes.failed, pod.UID)
	}
	a.volumes.mu.Unlock()
	switch {
	case len(errs) > 0:
		return volumeRetry
	case refresh:
		return volumeResync
	}
	return 0
}

// volumesMounted reports why the pod's containers cannot start yet, nil
// once every volume is set up.
func (a *Agent) volumesMounted(pod *corev1.Pod) error {
	a.volumes.mu.Lock()
	defer a.volumes.mu.Unlock()
	return a.volumes.failed[pod.UID]
}

func (a *Agent) setUpVolume(pod *corev1.Pod, v *corev1.Volume) error {
	src := &v.VolumeSource
	switch {
	case src.EmptyDir != nil:
		dir := a.volumeDir(pod.UID, pluginEmptyDir, v.Name)
		if src.EmptyDir.Medium == corev1.StorageMediumMemory {
			var size int64
			if src.EmptyDir.SizeLimit != nil {
				size = src.EmptyDir.SizeLimit.Value()
			}
			if err := ensureTmpfs(dir, 0o777, size); err != nil {
				return err
			}
			return a.ownVolume(pod, v.Name, dir, false)
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		return a.ownVolume(pod, v.Name, dir, false)
	case src.HostPath != nil:
		return checkHostPath(src.HostPath.Path, src.HostPath.Type)
	case src.PersistentVolumeClaim != nil:
		path, t, err := a.claimPath(pod, src.PersistentVolumeClaim.ClaimName)
		if err != nil {
			return err
		}
		if strings.HasPrefix(path, a.volumes.pvDir+"/") {
			err = os.MkdirAll(path, 0o755)
		} else {
			err = checkHostPath(path, t)
		}
		if err != nil {
			return err
		}
		return a.ownVolume(pod, v.Name, path, src.PersistentVolumeClaim.ReadOnly)
	case src.ConfigMap != nil:
		cm, err := a.volumes.configMap(a.runCtx, pod.Namespace, src.ConfigMap.Name, optional(src.ConfigMap.Optional))
		if err != nil {
			return err
		}
		files, err := volume.ConfigMap(src.ConfigMap, cm)
		if err != nil {
			return err
		}
		_, err = volume.Write(a.volumeDir(pod.UID, pluginConfigMap, v.Name), files)
		return err
	case src.Secret != nil:
		sec, err := a.volumes.secret(a.runCtx, pod.Namespace, src.Secret.SecretName, optional(src.Secret.Optional))
		if err != nil {
			return err
		}
		files, err := volume.Secret(src.Secret, sec)
		if err != nil {
			return err
		}
		return writeTmpfsVolume(a.volumeDir(pod.UID, pluginSecret, v.Name), files)
	case src.DownwardAPI != nil:
		files, err := volume.DownwardAPI(src.DownwardAPI, a.downwardValue(pod))
		if err != nil {
			return err
		}
		return writeTmpfsVolume(a.volumeDir(pod.UID, pluginDownward, v.Name), files)
	case src.Projected != nil:
		s := volume.Sources{
			ConfigMaps: map[string]*corev1.ConfigMap{}, Secrets: map[string]*corev1.Secret{},
			Field: a.downwardValue(pod), Tokens: map[string][]byte{}, TrustBundles: map[string][]byte{},
			PodCertificates: map[int]volume.Credentials{},
		}
		for i, p := range src.Projected.Sources {
			if t := p.ServiceAccountToken; t != nil {
				b, err := a.volumes.tokens.Token(a.runCtx, pod, t)
				if err != nil {
					return err
				}
				s.Tokens[t.Path] = b
			}
			if t := p.ClusterTrustBundle; t != nil {
				b, err := a.volumes.trustAnchors(t)
				if err != nil {
					return err
				}
				s.TrustBundles[t.Path] = b
			}
			if p.PodCertificate != nil {
				key, chain, err := a.volumes.podCerts.Credentials(pod, v.Name, i)
				if err != nil {
					return err
				}
				s.PodCertificates[i] = volume.Credentials{Key: key, Chain: chain}
			}
			if p.ConfigMap != nil {
				if cm, err := a.volumes.configMap(a.runCtx, pod.Namespace, p.ConfigMap.Name, true); err != nil {
					return err
				} else if cm != nil {
					s.ConfigMaps[cm.Name] = cm
				}
			}
			if p.Secret != nil {
				if sec, err := a.volumes.secret(a.runCtx, pod.Namespace, p.Secret.Name, true); err != nil {
					return err
				} else if sec != nil {
					s.Secrets[sec.Name] = sec
				}
			}
		}
		files, err := volume.Projected(src.Projected, s)
		if err != nil {
			return err
		}
		return writeTmpfsVolume(a.volumeDir(pod.UID, pluginProjected, v.Name), files)
	case src.Image != nil:
		return a.setUpImageVolume(a.runCtx, pod, v)
	}
	return errors.New("svcnet's node does not support this volume type")
}

// trustAnchors are the certificates of the ClusterTrustBundles a
// projection names.
func (m *volumeManager) trustAnchors(p *corev1.ClusterTrustBundleProjection) ([]byte, error) {
	opt := optional(p.Optional)
	if p.Name != nil {
		return m.trustBundles.ByName(*p.Name, opt)
	}
	if p.SignerName != nil {
		return m.trustBundles.BySigner(*p.SignerName, p.LabelSelector, opt)
	}
	return nil, errors.New("a clusterTrustBundle projection names neither a bundle nor a signer")
}

// configMap reads a ConfigMap from the cache: nil when it does not exist
// and the volume is optional, else upstream's not-found error.
func (m *volumeManager) configMap(ctx context.Context, ns, name string, opt bool) (*corev1.ConfigMap, error) {
	obj, err := cached(ctx, m.configMaps, ns, name, opt)
	if obj == nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

func (m *volumeManager) secret(ctx context.Context, ns, name string, opt bool) (*corev1.Secret, error) {
	obj, err := cached(ctx, m.secrets, ns, name, opt)
	if obj == nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

// cached reads an object from c: nil and no error when it does not exist
// and opt says that is fine.
func cached(ctx context.Context, c *objectcache.Cache, ns, name string, opt bool) (runtime.Object, error) {
	obj, err := c.Get(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err) && opt:
		return nil, nil
	case err != nil:
		return nil, err
	}
	return obj, nil
}

// downwardValue resolves the pod's downward API items.
func (a *Agent) downwardValue(pod *corev1.Pod) volume.FieldValue {
	return func(it corev1.DownwardAPIVolumeFile) (string, error) {
		switch {
		case it.FieldRef != nil:
			return fieldValue(pod, it.FieldRef.FieldPath, pod.Status.PodIP, a.nodeIP.String())
		case it.ResourceFieldRef != nil:
			if len(pod.Spec.Containers) == 0 {
				return "", errors.New("pod has no containers")
			}
			return a.env.resourceValue(pod, &pod.Spec.Containers[0], it.ResourceFieldRef)
		}
		return "", errors.New("neither fieldRef nor resourceFieldRef is set")
	}
}

// claimPath is where a bound claim's volume lives on the node, with the
// type its PersistentVolume's hostPath asks for.
func (a *Agent) claimPath(pod *corev1.Pod, name string) (string, *corev1.HostPathType, error) {
	claim, err := a.volumes.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(a.runCtx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, &claimError{pod: pod, claim: name, err: fmt.Errorf("failed to fetch PVC from API server: %w", err)}
	}
	if claim.DeletionTimestamp != nil {
		return "", nil, &claimError{pod: pod, claim: name, err: errors.New("PVC is being deleted")}
	}
	if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
		return "", nil, &claimError{pod: pod, claim: name, err: errors.New("PVC is not bound")}
	}
	pv, err := a.volumes.client.CoreV1().PersistentVolumes().Get(a.runCtx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", nil, &claimError{pod: pod, claim: name, err: fmt.Errorf("failed to fetch PV %s from API server: %w", claim.Spec.VolumeName, err)}
	}
	if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "" && pv.Spec.ClaimRef.UID != claim.UID {
		return "", nil, &claimError{pod: pod, claim: name, err: fmt.Errorf("the PV %s is bound to another claim", pv.Name)}
	}
	if !a.attached(pv) {
		return "", nil, errNotAttached
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, pv.Spec.HostPath.Type, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil, nil
	}
	return filepath.Join(a.volumes.pvDir, pv.Name), nil, nil
}

// checkHostPath checks (and for the ...OrCreate types makes) a hostPath
// volume's path as upstream's hostPath plugin does.
func checkHostPath(path string, t *corev1.HostPathType) error {
	if t == nil || *t == corev1.HostPathUnset {
		return nil
	}
	_, statErr := os.Stat(path)
	exists := statErr == nil
	want := *t
	switch *t {
	case corev1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(path, 0o755)
		}
		want = corev1.HostPathDirectory
	case corev1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		want = corev1.HostPathFile
	case corev1.HostPathDirectory, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev:
	default:
		return fmt.Errorf("%s is an invalid volume type", *t)
	}
	desc := map[corev1.HostPathType]string{
		corev1.HostPathDirectory: "directory", corev1.HostPathFile: "file", corev1.HostPathSocket: "socket file",
		corev1.HostPathCharDev: "character device", corev1.HostPathBlockDev: "block device",
	}[want]
	if !exists {
		return fmt.Errorf("hostPath %s doesn't exist", path)
	}
	got, err := fileType(path)
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, desc, err)
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, desc, got)
	}
	return nil
}

// fileType names a path's type in hostPath's words.
func fileType(path string) (corev1.HostPathType, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	m := info.Mode()
	switch {
	case m.IsDir():
		return corev1.HostPathDirectory, nil
	case m.IsRegular():
		return corev1.HostPathFile, nil
	case m&fs.ModeSocket != 0:
		return corev1.HostPathSocket, nil
	case m&fs.ModeCharDevice != 0:
		return corev1.HostPathCharDev, nil
	case m&fs.ModeDevice != 0:
		return corev1.HostPathBlockDev, nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character devices")
}

// writeTmpfsVolume writes files into a tmpfs at dir.
func writeTmpfsVolume(dir string, files map[string]volume.File) error {
	if err := ensureTmpfs(dir, 0o755, 0); err != nil {
		return err
	}
	_, err := volume.Write(dir, files)
	return err
}

// ensureTmpfs mounts a tmpfs of size bytes (0: the kernel's default) at
// dir unless one is there.
func ensureTmpfs(dir string, mode fs.FileMode, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if mounted, err := isMountPoint(dir); err != nil || mounted {
		return err
	}
	opts := "mode=" + strconv.FormatUint(uint64(mode.Perm()), 8)
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is on another filesystem than its
// parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}

// tearDownVolumes unmounts the tmpfs volumes of a pod whose containers
// have ended, so that its directory can be removed.
func (a *Agent) tearDownVolumes(uid string) error {
	if a.volumes != nil {
		a.volumes.mu.Lock()
		delete(a.volumes.failed, types.UID(uid))
		delete(a.volumes.owned, types.UID(uid))
		a.volumes.mu.Unlock()
		a.volumes.tokens.Forget(types.UID(uid))
		a.volumes.podCerts.Forget(types.UID(uid))
		a.volumes.configMaps.Unregister(types.UID(uid))
		a.volumes.secrets.Unregister(types.UID(uid))
	}
	dirs, err := filepath.Glob(filepath.Join(a.rt.podDir(uid), "volumes", "*", "*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		mounted, err := isMountPoint(d)
		if err != nil || !mounted {
			continue
		}
		if err := unix.Unmount(d, unix.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", d, err))
		}
	}
	if len(errs) == 0 && a.volumes != nil {
		a.volumes.releaseVolumeImages(types.UID(uid))
	}
	return errors.Join(errs...)
}

// containerMounts are the bind mounts of a container's volumeMounts, with
// subPath and subPathExpr (expanded with the container's env) resolved;
// for a host process (no runc), which has no root of its image's, those
// of its image's own files first.
func (a *Agent) containerMounts(pod *corev1.Pod, spec *corev1.Container, env []string) ([]bindFile, error) {
	byName := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		byName[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []bindFile
	if a.images == nil {
		files, err := imageFileMounts(a.cfg.DataDir, a.cfg.Images, spec)
		if err != nil {
			return nil, err
		}
		out = files
	}
	for _, m := range spec.VolumeMounts {
		v, ok := byName[m.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", m.Name, spec.Name)
		}
		source, readOnly, err := a.volumeSource(pod, v)
		if err != nil {
			return nil, err
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expandArgs([]string{m.SubPathExpr}, env)[0]
		}
		if sub != "" {
			if source, err = volume.SubPath(source, sub); err != nil {
				return nil, fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q: %w", m.Name, spec.Name, err)
			}
		}
		out = append(out, bindFile{Source: source, Target: m.MountPath, ReadOnly: m.ReadOnly || readOnly})
	}
	return out, nil
}

// volumeSource is the node path a volume's mounts bind, and whether the
// volume itself is read-only.
func (a *Agent) volumeSource(pod *corev1.Pod, v *corev1.Volume) (string, bool, error) {
	src := &v.VolumeSource
	switch {
	case src.EmptyDir != nil:
		return a.volumeDir(pod.UID, pluginEmptyDir, v.Name), false, nil
	case src.HostPath != nil:
		return src.HostPath.Path, false, nil
	case src.PersistentVolumeClaim != nil:
		path, _, err := a.claimPath(pod, src.PersistentVolumeClaim.ClaimName)
		return path, src.PersistentVolumeClaim.ReadOnly, err
	case src.ConfigMap != nil:
		return a.volumeDir(pod.UID, pluginConfigMap, v.Name), true, nil
	case src.Secret != nil:
		return a.volumeDir(pod.UID, pluginSecret, v.Name), true, nil
	case src.DownwardAPI != nil:
		return a.volumeDir(pod.UID, pluginDownward, v.Name), true, nil
	case src.Projected != nil:
		return a.volumeDir(pod.UID, pluginProjected, v.Name), true, nil
	case src.Image != nil:
		return a.volumeDir(pod.UID, pluginImage, v.Name), true, nil
	}
	return "", false, fmt.Errorf("volume %q has an unsupported type", v.Name)
}
