// Package netns runs code inside Linux network namespaces: a goroutine
// locked to an OS thread that is switched into a namespace and back, so
// that sockets it opens (listeners, dials) live in that namespace for good
// while the rest of the process stays where it started. It also makes and
// removes namespaces pinned by a bind mount, as `ip netns add` does, so
// that they outlive every process and can be entered by path.
//
// The node agent, its pod network (internal/cni), the Service proxy and
// `svcnet up --nodes N` all reach into namespaces through it.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NamedDir is where `ip netns` pins named namespaces.
const NamedDir = "/var/run/netns"

// Path is where `ip netns` pins the network namespace called name; empty
// for an empty name, which means the process's own namespace.
func Path(name string) string {
	if name == "" {
		return ""
	}
	return filepath.Join(NamedDir, name)
}

// Do runs fn on an OS thread switched into the network namespace pinned at
// path (empty: the process's own), then switches the thread back. Sockets
// fn opens stay in that namespace.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	return onSwitchedThread(func() error {
		if err := vnetns.Set(ns); err != nil {
			return fmt.Errorf("enter network namespace %s: %w", path, err)
		}
		return nil
	}, fn)
}

// DoIn runs fn on an OS thread switched into ns, then switches the thread
// back, as Do does for a namespace already open.
func DoIn(ns vnetns.NsHandle, fn func() error) error {
	return onSwitchedThread(func() error {
		if err := vnetns.Set(ns); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		return nil
	}, fn)
}

// ListenAt is a listen function for servers of the network namespace
// pinned at path (empty: the process's own).
func ListenAt(path string) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		var ln net.Listener
		err := Do(path, func() error {
			var err error
			ln, err = net.Listen(network, address)
			return err
		})
		return ln, err
	}
}

// onSwitchedThread locks the goroutine to its OS thread, runs enter to
// switch the thread's network namespace and then fn, and switches the thread
// back to its original namespace. fn is not run if enter fails.
func onSwitchedThread(enter, fn func() error) error {
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open the thread's network namespace: %w", err)
	}
	defer orig.Close()
	if err := enter(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	if err := vnetns.Set(orig); err != nil {
		// The thread is in the wrong namespace: keep it locked so that it
		// exits with this goroutine instead of serving others.
		return errors.Join(fnErr, fmt.Errorf("return to the original network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Create makes a new network namespace and pins it by bind-mounting it on
// path, so that it outlives every process and can be entered by path. The
// new namespace has only a loopback interface, down.
func Create(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create namespace file %s: %w", path, err)
	}
	f.Close()
	err = onSwitchedThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare network namespace: %w", err)
		}
		return nil
	}, func() error {
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount network namespace on %s: %w", path, err)
		}
		return nil
	})
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// Pinned reports whether path holds a pinned network namespace (a bind
// mount of one), as Create leaves it.
func Pinned(path string) bool {
	ns, err := vnetns.GetFromPath(path)
	if err != nil {
		return false
	}
	defer ns.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns), &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// Remove unpins a namespace made by Create; it is gone once the last
// process in it has exited.
func Remove(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace file %s: %w", path, err)
	}
	return nil
}

// Dialer dials from inside a network namespace.
type Dialer struct {
	ns vnetns.NsHandle
}

// NewDialer dials from ns, which must stay open while the dialer is used.
func NewDialer(ns vnetns.NsHandle) Dialer { return Dialer{ns: ns} }

// DialContext connects to address from the namespace.
func (d Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := DoIn(d.ns, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return conn, err
}
