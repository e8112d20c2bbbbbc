package builtin

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// agnhost guestbook as upstream's Guestbook conformance test runs it: a
// primary, a replica that registers with it, and a frontend that writes
// through the agnhost-primary Service and reads through agnhost-replica
// (here names for the loopback ports of the two).
func TestGuestbook(t *testing.T) {
	primary, replica, frontend := freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "tcp")
	services := map[string]string{
		"agnhost-primary:6379": fmt.Sprintf("127.0.0.1:%d", primary),
		"agnhost-replica:6379": fmt.Sprintf("127.0.0.1:%d", replica),
	}
	dial := guestbookDial
	guestbookDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := services[addr]; ok {
			addr = a
		}
		return dial(ctx, network, addr)
	}
	t.Cleanup(func() { guestbookDial = dial })
	get := func(port int, path string, query url.Values) string {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s?%s", port, path, query.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}

	// The primary sends its writes to its replicas' --backend-port: the
	// replica's port here, where all listen on one address.
	startAgnhost(t, "guestbook", fmt.Sprintf("--http-port=%d", primary), fmt.Sprintf("--backend-port=%d", replica))
	if got := get(primary, "/set", url.Values{"key": {"early"}, "value": {"before the replica"}}); got != `200 {"message":"Updated"}` {
		t.Fatalf("set on the primary: %s", got)
	}
	startAgnhost(t, "guestbook", fmt.Sprintf("--http-port=%d", replica), "--replicaof=127.0.0.1", fmt.Sprintf("--backend-port=%d", primary))
	startAgnhost(t, "guestbook", fmt.Sprintf("--http-port=%d", frontend), "--backend-port=6379")

	// The replica has the primary's store once it has registered.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := get(replica, "/get", url.Values{"key": {"early"}})
		if got == `200 {"data":"before the replica"}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica never registered: its early key is %s", got)
		}
	}
	guestbook := func(cmd, value string) string {
		t.Helper()
		return get(frontend, "/guestbook", url.Values{"cmd": {cmd}, "key": {"messages"}, "value": {value}})
	}
	// The conformance test's requests and answers.
	for _, c := range []struct{ cmd, value, want string }{
		{"get", "", `200 {"data":""}`},
		{"set", "TestEntry", `200 {"message":"Updated"}`},
		{"get", "", `200 {"data":"TestEntry"}`},
		{"SET", "a&b=c d", `200 {"message":"Updated"}`},
		{"get", "", `200 {"data":"a\u0026b=c d"}`},
		{"delete", "", "400 unsupported cmd: 'delete'\n"},
	} {
		if got := guestbook(c.cmd, c.value); got != c.want {
			t.Errorf("guestbook %s %q: %s, want %s", c.cmd, c.value, got, c.want)
		}
	}
	// The write reached the replica, which answered the read above.
	if got := get(replica, "/get", nil); got != `200 {"data":{"early":"before the replica","messages":"a\u0026b=c d"}}` {
		t.Errorf("the replica's store: %s", got)
	}
	if got := get(frontend, "/guestbook", url.Values{"cmd": {"set"}}); got != "400 cannot set with empty key.\n" {
		t.Errorf("set without a key: %s", got)
	}
}
