// Package storagetest starts what tests of the storage layer's users need:
// a free loopback port and an embedded etcd with a client for it.
package storagetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/svcnet/svcnet/internal/storage"
)

// handedOut remembers the ports FreePort returned in this process: a port
// is only free until its user binds it, so two calls before either binds
// must not return the same one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// The ports FreePort chooses from lie below Linux's default ephemeral
// range (32768-60999), from which connect() picks the source port of
// every outgoing connection: a port taken from there could be a client's
// by the time its server binds it, when tests run in parallel.
const (
	firstPort = 20000
	lastPort  = 32767
)

// FreePort returns a loopback port nobody listens on now and that no
// earlier call in this process returned.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range lastPort - firstPort {
		port := firstPort + rand.IntN(lastPort-firstPort+1)
		if handedOut.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		l.Close()
		handedOut.ports[port] = true
		return port
	}
	t.Fatalf("no free loopback port in %d-%d", firstPort, lastPort)
	return 0
}

// FreeURL returns an http URL on a free loopback port.
func FreeURL(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
}

// Start starts an embedded etcd in a temporary directory and returns a
// client for it; both are closed when the test ends.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	_, cli := StartEmbedded(t, storage.EmbeddedConfig{})
	return cli
}

// StartEmbedded starts an embedded etcd as c says (without TLS), in a
// temporary directory on free ports unless c places it, and returns it
// with a client for it; both are closed when the test ends.
func StartEmbedded(t testing.TB, c storage.EmbeddedConfig) (*storage.Embedded, *clientv3.Client) {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	if c.ClientURL == "" {
		c.ClientURL = FreeURL(t)
	}
	if c.PeerURL == "" {
		c.PeerURL = FreeURL(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e, err := storage.StartEmbedded(ctx, c)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cli, err := storage.Connect([]string{e.ClientURL}, storage.TLSFiles{})
	if err != nil {
		cancel()
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); cancel(); e.Close() })
	return e, cli
}
