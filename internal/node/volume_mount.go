package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Mounts inside a container's mount namespace, made by its shim.
//
// Containers run on the host's own filesystem, so a mountPath such as /data
// usually has no directory to mount on, and the host must not get one. The
// shim makes the missing mount point inside its private mount namespace
// only: it takes the nearest directory that exists (/ for /data), builds a
// copy of it on a tmpfs (every entry bind-mounted from the original,
// symbolic links re-created, the missing directories added), and puts that
// copy over the original, in this namespace alone. For / the copy becomes
// the namespace's root (moved over / and chrooted into, as switch_root
// does); a process that later enters the namespace (exec) sees it too. The
// host's directories and files stay as they are; what a container writes
// through a bind-mounted entry reaches the host file, as it would without
// the copy.

// source stats the mount's source; a missing source is made a directory,
// as containerd's CRI makes it (a hostPath volume without a type, say).
func (m bindFile) source() (fs.FileInfo, error) {
	info, err := os.Stat(m.Source)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(m.Source, 0o755); err == nil {
			info, err = os.Stat(m.Source)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("mount source %s: %w", m.Source, err)
	}
	return info, nil
}

// mountAll makes every mount, parents before children; stage is an empty
// directory for building copies.
func mountAll(mounts []bindFile, stage string) error {
	if len(mounts) == 0 {
		return nil
	}
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return fmt.Errorf("create mount staging dir: %w", err)
	}
	sorted := slices.Clone(mounts)
	slices.SortStableFunc(sorted, func(a, b bindFile) int {
		return strings.Count(filepath.Clean(a.Target), "/") - strings.Count(filepath.Clean(b.Target), "/")
	})
	mp := &mountPoints{stage: stage, ours: map[string]bool{}}
	for _, m := range sorted {
		info, err := m.source()
		if err != nil {
			return err
		}
		target := filepath.Clean(m.Target)
		if err := mp.ensure(target, info.IsDir()); err != nil {
			return fmt.Errorf("make mount point %s: %w", target, err)
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.Source, target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", target, err)
			}
		}
		if info.IsDir() && !m.ReadOnly {
			// A writable volume may hold the mount points of later mounts.
			mp.ours[target] = true
		}
	}
	return nil
}

// mountPoints makes mount points; ours are directories this namespace
// owns (copies on tmpfs, writable volumes), where a missing one is simply
// created.
type mountPoints struct {
	stage string
	ours  map[string]bool
}

// ensure makes target exist as a directory (dir) or a file.
func (mp *mountPoints) ensure(target string, dir bool) error {
	info, err := os.Stat(target)
	if err == nil {
		if info.IsDir() != dir {
			return fmt.Errorf("cannot mount a %s over a %s", kind(dir), kind(info.IsDir()))
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	base := filepath.Dir(target)
	for {
		if _, err := os.Stat(base); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		base = filepath.Dir(base)
	}
	if !mp.ours[base] {
		if err := mp.shadow(base); err != nil {
			return err
		}
	}
	return mp.create(base, target, dir)
}

// create makes the missing path from base (ours) to target.
func (mp *mountPoints) create(base, target string, dir bool) error {
	rel, err := filepath.Rel(base, target)
	if err != nil {
		return err
	}
	cur := base
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		if i == len(parts)-1 && !dir {
			f, err := os.OpenFile(cur, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		mp.ours[cur] = true
	}
	return nil
}

// shadow puts a tmpfs copy of dir over dir, in this namespace only.
func (mp *mountPoints) shadow(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", mp.stage, "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("mount tmpfs for a copy of %s: %w", dir, err)
	}
	if err := os.Chmod(mp.stage, info.Mode().Perm()); err != nil {
		return err
	}
	for _, e := range entries {
		if err := copyEntry(filepath.Join(dir, e.Name()), filepath.Join(mp.stage, e.Name()), e); err != nil {
			return err
		}
	}
	// The copy of a tree that holds the staging dir holds a copy of the
	// staging tmpfs too; it has no business there.
	if rel, err := filepath.Rel(dir, mp.stage); err == nil && !strings.HasPrefix(rel, "..") {
		_ = unix.Unmount(filepath.Join(mp.stage, rel), unix.MNT_DETACH)
	}
	if dir == "/" {
		if err := switchRoot(mp.stage); err != nil {
			return err
		}
	} else if err := unix.Mount(mp.stage, dir, "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the copy of %s over it: %w", dir, err)
	}
	mp.ours[dir] = true
	return nil
}

// copyEntry makes dst (on the copy's tmpfs) show src: a bind mount of
// it, or the same symbolic link.
func copyEntry(src, dst string, e fs.DirEntry) error {
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		link, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(link, dst)
	case e.IsDir():
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
	default:
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s into the copy: %w", src, err)
	}
	return nil
}

// switchRoot makes newRoot the namespace's root: moved over / and
// chrooted into, so that the shim, the container and whoever enters the
// namespace later all see it.
func switchRoot(newRoot string) error {
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("chdir to the new root: %w", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the new root over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot to the new root: %w", err)
	}
	return unix.Chdir("/")
}

func kind(dir bool) string {
	if dir {
		return "directory"
	}
	return "file"
}
