package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/authn/kubernetes"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/node/images"
	"github.com/svcnet/svcnet/internal/node/oci"
)

// Runtimes a node runs containers with.
const (
	// RuntimeProcess runs the image table's programs as host processes.
	RuntimeProcess = "process"
	// RuntimeRunc pulls the images the image table does not map,
	// assembles those it maps, and runs them isolated with runc.
	RuntimeRunc = "runc"
	// RuntimeAuto is RuntimeRunc where runc is installed and the cgroups
	// are mounted, RuntimeProcess elsewhere.
	RuntimeAuto = "auto"
)

// cgroupParent holds the cgroups of the containers runc runs.
const cgroupParent = "svcnet"

// ensureImage makes the container's image present as its pull policy
// says, with the pod's image pull secrets, reporting as the kubelet's
// image manager does (events Pulling, Pulled, Failed, BackOff; waiting
// reasons ErrImagePull, ImagePullBackOff, ErrImageNeverPull).
func (a *Agent) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container) (*images.Image, waitReason, error) {
	img, err := a.images.Lookup(c.Image)
	present := err == nil
	if err != nil && !errors.Is(err, images.ErrNotFound) {
		return nil, waitReason{reason: "InvalidImageName", message: err.Error()}, err
	}
	switch {
	case c.ImagePullPolicy == corev1.PullNever && !present:
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		a.event(pod, c.Name, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return nil, waitReason{reason: "ErrImageNeverPull", message: msg}, errors.New(msg)
	case present && c.ImagePullPolicy != corev1.PullAlways:
		a.event(pod, c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
		return img, waitReason{}, nil
	}
	key := pullKey(pod, c.Image)
	if a.pullBackoff.IsInBackOffSinceUpdate(key, time.Now()) {
		a.event(pod, c.Name, corev1.EventTypeNormal, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image))
		msg := fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", c.Image, a.lastPullError(key))
		return nil, waitReason{reason: "ImagePullBackOff", message: msg}, errors.New(msg)
	}
	a.event(pod, c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := time.Now()
	img, err = a.images.Pull(ctx, c.Image, a.pullSecrets(ctx, pod))
	if err != nil {
		a.pullBackoff.Next(key, time.Now())
		a.pullErrors.Store(key, err.Error())
		a.event(pod, c.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", c.Image, err))
		a.event(pod, c.Name, corev1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		return nil, waitReason{reason: "ErrImagePull", message: err.Error()}, err
	}
	a.pullBackoff.Reset(key)
	a.pullErrors.Delete(key)
	took := time.Since(start).Round(time.Millisecond)
	a.event(pod, c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf(
		"Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", c.Image, took, took, img.Size))
	return img, waitReason{}, nil
}

// pullKey names the pulls of image for pod in the back-off.
func pullKey(pod *corev1.Pod, image string) string { return string(pod.UID) + "/" + image }

// forgetPulls drops the back-off of a removed pod's image pulls.
func (a *Agent) forgetPulls(pod *corev1.Pod) {
	if pod == nil || a.pullBackoff == nil {
		return
	}
	for _, c := range podContainers(pod) {
		a.pullBackoff.DeleteEntry(pullKey(pod, c.Image))
		a.pullErrors.Delete(pullKey(pod, c.Image))
	}
}

// lastPullError is the message of the last failed pull of key.
func (a *Agent) lastPullError(key string) string {
	if v, ok := a.pullErrors.Load(key); ok {
		return v.(string)
	}
	return ""
}

// pullSecrets is a keychain of the pod's image pull secrets; one that
// cannot be read is skipped, as the kubelet skips it.
func (a *Agent) pullSecrets(ctx context.Context, pod *corev1.Pod) authn.Keychain {
	var secrets []corev1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := a.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			slog.Warn("node: image pull secret", "pod", pod.Namespace+"/"+pod.Name, "secret", ref.Name, "err", err)
			continue
		}
		secrets = append(secrets, *s)
	}
	if len(secrets) == 0 {
		return nil
	}
	kc, err := kubernetes.NewFromPullSecrets(ctx, secrets)
	if err != nil {
		slog.Warn("node: image pull secrets", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return nil
	}
	return kc
}

// ociContainer is the runc run of a pulled image: the runtime spec and
// the image's layers.
func (a *Agent) ociContainer(pod *corev1.Pod, sb *sandbox, c *corev1.Container, img *images.Image, env []string, mounts []bindFile, id string) (*oci.Container, error) {
	proc, err := oci.Merge(img.Config, expandArgs(c.Command, env), expandArgs(c.Args, env), env, c.WorkingDir)
	if err != nil {
		return nil, err
	}
	uid, gid, err := a.user(pod, c, img, proc.User)
	if err != nil {
		return nil, err
	}
	oc := &oci.Container{
		Process:     proc,
		UID:         uid,
		GID:         gid,
		Groups:      containerGroups(pod),
		Hostname:    podHostname(pod),
		NetNS:       sb.netns,
		PIDNS:       sb.pidNS,
		CgroupsPath: "/" + cgroupParent + "/" + id,
	}
	for _, m := range mounts {
		if _, err := m.source(); err != nil {
			return nil, err
		}
		oc.Mounts = append(oc.Mounts, oci.Mount{Source: m.Source, Destination: m.Target, ReadOnly: m.ReadOnly})
	}
	if err := a.seccomp(pod, c, oc); err != nil {
		return nil, err
	}
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		// The pod's, set in each of its containers' namespaces (IPC
		// namespaces are a container's own here; the network one is
		// the pod's).
		oc.Sysctls = map[string]string{}
		for _, sc := range psc.Sysctls {
			oc.Sysctls[sysctlName(sc.Name)] = sc.Value
		}
	}
	if sc := c.SecurityContext; sc != nil {
		oc.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		oc.Privileged = sc.Privileged != nil && *sc.Privileged
		oc.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		if sc.Capabilities != nil {
			for _, x := range sc.Capabilities.Add {
				oc.CapAdd = append(oc.CapAdd, string(x))
			}
			for _, x := range sc.Capabilities.Drop {
				oc.CapDrop = append(oc.CapDrop, string(x))
			}
		}
	}
	oc.MemoryLimit, oc.CPUQuota, oc.CPUShares = cgroupLimits(appliedResources(c))
	return oc, nil
}

// seccomp applies the seccompProfile (the container's over the pod's):
// RuntimeDefault is containerd's profile, Localhost a profile file under
// the node's seccomp directory (the kubelet's --seccomp-profile-root).
func (a *Agent) seccomp(pod *corev1.Pod, c *corev1.Container, oc *oci.Container) error {
	var p *corev1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		p = psc.SeccompProfile
	}
	if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		p = sc.SeccompProfile
	}
	switch {
	case p == nil || p.Type == corev1.SeccompProfileTypeUnconfined:
	case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		oc.SeccompRuntimeDefault = true
	case p.Type == corev1.SeccompProfileTypeLocalhost && p.LocalhostProfile != nil:
		file := filepath.Join(a.cfg.DataDir, "seccomp", filepath.Clean("/"+*p.LocalhostProfile))
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("cannot load seccomp profile %q: %w", file, err)
		}
		oc.Seccomp = &specs.LinuxSeccomp{}
		if err := json.Unmarshal(b, oc.Seccomp); err != nil {
			return fmt.Errorf("decoding seccomp profile %q failed: %w", file, err)
		}
	default:
		return fmt.Errorf("unsupported seccomp profile type %q", p.Type)
	}
	return nil
}

// user is the container's uid and gid: runAsUser and runAsGroup (the
// container's over the pod's) over the image's user, whose name is
// looked up in the image's /etc/passwd.
func (a *Agent) user(pod *corev1.Pod, c *corev1.Container, img *images.Image, imageUser string) (uint32, uint32, error) {
	var runAsUser, runAsGroup *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		runAsUser, runAsGroup = psc.RunAsUser, psc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			runAsUser = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			runAsGroup = sc.RunAsGroup
		}
	}
	user := imageUser
	if runAsUser != nil {
		user = strconv.FormatInt(*runAsUser, 10)
	}
	passwd, _ := a.images.ReadFile(img, "/etc/passwd")
	group, _ := a.images.ReadFile(img, "/etc/group")
	uid, gid, err := oci.ResolveUser(user, passwd, group)
	if err != nil {
		return 0, 0, err
	}
	if runAsGroup != nil {
		gid = uint32(*runAsGroup)
	}
	nonRoot := false
	if psc := pod.Spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil {
		nonRoot = *psc.RunAsNonRoot
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if nonRoot {
		// The kubelet's verifyRunAsNonRoot, in its words.
		podRef := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
		name, _, _ := strings.Cut(imageUser, ":")
		_, numeric := strconv.ParseUint(name, 10, 32)
		switch {
		case runAsUser != nil && *runAsUser == 0:
			return 0, 0, fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podRef, c.Name)
		case runAsUser == nil && name != "" && numeric != nil:
			return 0, 0, fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", name, podRef, c.Name)
		case uid == 0:
			return 0, 0, fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podRef, c.Name)
		}
	}
	return uid, gid, nil
}

// sysctlName is a sysctl's name with dots between its parts, as the
// kubelet normalizes one given with slashes (kernel/shm_rmid_forced, or
// net/ipv4/conf/eno2.100/rp_filter, where a dot belongs to a part).
func sysctlName(name string) string {
	if i := strings.IndexAny(name, "./"); i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, name)
}
