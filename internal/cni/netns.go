package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNamespace runs fn on an OS thread switched into ns, then switches the
// thread back. Sockets created by fn stay in ns for their whole life, which
// is how the agent dials and listens in a node namespace while the rest of
// the process (its API client) stays in the namespace it started in.
func inNamespace(ns netns.NsHandle, fn func() error) error {
	return onSwitchedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		return nil
	}, fn)
}

// NamedNamespacePath is where `ip netns` pins the network namespace called
// name; empty for an empty name, which means the process's own namespace.
func NamedNamespacePath(name string) string {
	if name == "" {
		return ""
	}
	return "/var/run/netns/" + name
}

// InNamespaceAt runs fn on an OS thread switched into the network namespace
// pinned at path (empty: the process's own), then switches the thread back.
// Sockets fn opens stay in that namespace.
func InNamespaceAt(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	return onSwitchedThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter network namespace %s: %w", path, err)
		}
		return nil
	}, fn)
}

// ListenAt is a listen function for servers of the network namespace
// pinned at path (empty: the process's own).
func ListenAt(path string) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		var ln net.Listener
		err := InNamespaceAt(path, func() error {
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
	orig, err := netns.Get()
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
	if err := netns.Set(orig); err != nil {
		// The thread is in the wrong namespace: keep it locked so that it
		// exits with this goroutine instead of serving others.
		return errors.Join(fnErr, fmt.Errorf("return to the original network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// createNamespace makes a new network namespace and pins it by bind-mounting
// it on path, so that it outlives every process and can be entered by path.
func createNamespace(path string) error {
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

// removeNamespace unpins a namespace made by createNamespace; it is gone
// once the last process in it has exited.
func removeNamespace(path string) error {
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
	ns netns.NsHandle
}

// DialContext connects to address from the namespace.
func (d Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := inNamespace(d.ns, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, address)
		return err
	})
	return conn, err
}
