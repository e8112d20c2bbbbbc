package builtin

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A built-in server says it has started only once its port accepts
// connections: what the shim waits for before it reports the container
// started.
func TestReadyOnceListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readyFile = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agnhost(ctx, []string{"netexec", fmt.Sprintf("--http-port=%d", port), "--udp-port=-1"})
	}()
	_ = r.SetReadDeadline(time.Now().Add(10 * time.Second))
	said, err := io.ReadAll(r)
	if err != nil || string(said) != "ok" {
		t.Fatalf("the program said %q (%v), want ok and the end of the pipe", said, err)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("said it started, yet its port refuses: %v", err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
