package node

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// Volume ownership, as the kubelet's SetVolumeOwnership: with the pod's
// securityContext.fsGroup, an emptyDir or claim volume is given to that
// group when the pod first sets it up: every file and directory's group
// becomes fsGroup, files gain group read-write (read only for a read-only
// claim), directories group rwx and the setgid bit, so that what the
// containers create there is the group's too. fsGroupChangePolicy
// OnRootMismatch skips the walk when the volume's root already has the
// group and the bits. The containers run with fsGroup and the pod's
// supplementalGroups as supplementary groups (containerGroups).

// Upstream's masks: group read-write for files, read-only for read-only
// volumes, and group execute for directories.
const (
	rwMask   fs.FileMode = 0o660
	roMask   fs.FileMode = 0o440
	execMask fs.FileMode = 0o110
)

// fsGroupOf is the pod's fsGroup, nil without one.
func fsGroupOf(pod *corev1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// ownVolume gives a volume's dir to the pod's fsGroup once per pod.
func (a *Agent) ownVolume(pod *corev1.Pod, volume, dir string, readOnly bool) error {
	if fsGroupOf(pod) == nil {
		return nil
	}
	m := a.volumes
	m.mu.Lock()
	done := m.owned[pod.UID][volume]
	m.mu.Unlock()
	if done {
		return nil
	}
	if err := setVolumeOwnership(pod, dir, readOnly); err != nil {
		return err
	}
	m.mu.Lock()
	if m.owned[pod.UID] == nil {
		m.owned[pod.UID] = map[string]bool{}
	}
	m.owned[pod.UID][volume] = true
	m.mu.Unlock()
	return nil
}

// setVolumeOwnership gives dir's tree to the pod's fsGroup, if it has one.
func setVolumeOwnership(pod *corev1.Pod, dir string, readOnly bool) error {
	gid := fsGroupOf(pod)
	if gid == nil {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	sc := pod.Spec.SecurityContext
	if sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy == corev1.FSGroupChangeOnRootMismatch && ownedBy(dir, *gid, mask) {
		return nil
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(*gid)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= fs.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()|m)
	})
	if err != nil {
		return fmt.Errorf("set volume ownership of %s to group %d: %w", dir, *gid, err)
	}
	return nil
}

// ownedBy tells whether dir's root already has group gid, the setgid bit
// and the mask's permissions.
func ownedBy(dir string, gid int64, mask fs.FileMode) bool {
	info, err := os.Stat(dir)
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	want := mask | execMask
	return ok && int64(st.Gid) == gid && info.Mode()&fs.ModeSetgid != 0 && info.Mode().Perm()&want == want
}

// containerGroups are a container's supplementary groups: the pod's
// fsGroup and supplementalGroups.
func containerGroups(pod *corev1.Pod) []uint32 {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	var out []uint32
	if sc.FSGroup != nil {
		out = append(out, uint32(*sc.FSGroup))
	}
	for _, g := range sc.SupplementalGroups {
		out = append(out, uint32(g))
	}
	return out
}
