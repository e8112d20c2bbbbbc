package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd image's program, as upstream's Aggregator conformance test
// runs it: it says it started once it serves clients, keeps what they
// write in its default data dir (default.etcd in the working directory),
// and SIGTERM ends it as it ends etcd, by the signal once it has stopped.
func TestEtcd(t *testing.T) {
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t, "tcp"))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t, "tcp"))
	cmd, out := startBuiltin(t, Etcd, dir, "/usr/local/bin/etcd",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		// Not etcd's default peer port, 2380, which may be in use.
		"--listen-peer-urls", peer)
	if cmd.ProcessState != nil {
		t.Fatalf("etcd ended at its start (%v):\n%s", cmd.ProcessState, out)
	}

	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "/registry/wardle.example.com/flunders/ns/a", "hello"); err != nil {
		c.Close()
		t.Fatalf("put, once etcd said it started: %v", err)
	}
	resp, err := c.Get(ctx, "/registry/wardle.example.com/flunders/ns/a")
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "hello" {
		t.Fatalf("get: %v, want the value put", resp.Kvs)
	}
	if _, err := os.Stat(filepath.Join(dir, "default.etcd", "member")); err != nil {
		t.Errorf("etcd's default data dir: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st := waitBuiltin(t, cmd, 30*time.Second)
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("after SIGTERM: %v, want ended by SIGTERM, as etcd ends", st)
	}
	if testing.Verbose() {
		t.Logf("etcd said:\n%s", out)
	}
}
