package builtin

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// freePort is a port of 127.0.0.1 free for network ("tcp" or "udp") when
// asked.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startAgnhost runs agnhost with args until the test ends, once it has
// said on the shim's descriptor that it started (and closed it).
func startAgnhost(t *testing.T, args ...string) {
	t.Helper()
	startProgram(t, "agnhost "+args[0], func(ctx context.Context) error { return agnhost(ctx, args) })
}

// startProgram runs a built-in program until the test ends, once it has
// said on the shim's descriptor that it started (and closed it).
func startProgram(t *testing.T, name string, run func(context.Context) error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readyFile.Store(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	_ = r.SetReadDeadline(time.Now().Add(10 * time.Second))
	if said, err := io.ReadAll(r); err != nil || string(said) != "ok" {
		t.Fatalf("%s said %q (%v), want ok and the end of the pipe", name, said, err)
	}
}

// A built-in server says it has started only once its port accepts
// connections: what the shim waits for before it reports the container
// started.
func TestReadyOnceListening(t *testing.T) {
	port := freePort(t, "tcp")
	startAgnhost(t, "netexec", fmt.Sprintf("--http-port=%d", port), "--udp-port=-1")
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("said it started, yet its port refuses: %v", err)
	}
	c.Close()
	// netexec's /envvar, which upstream's e2e tests read NODE_NAME by:
	// the value, 500 for an unset variable, 400 without a name.
	t.Setenv("SVCNET_TEST_ENVVAR", "node-a")
	for path, want := range map[string]string{
		"/envvar?var=SVCNET_TEST_ENVVAR": "200 node-a",
		"/envvar?var=SVCNET_TEST_UNSET":  "500 env var \"SVCNET_TEST_UNSET\" is not set\n",
		"/envvar":                        "400 'var' query parameter is required\n",
		"/serverport":                    fmt.Sprintf("200 %d", port),
	} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := fmt.Sprintf("%d %s", resp.StatusCode, body); got != want {
			t.Errorf("GET %s: %q, want %q", path, got, want)
		}
	}
}

// agnhost test-webserver serves the container's files by path, with the
// image's own /localhost.crt, and 404 for what does not exist.
func TestTestWebserver(t *testing.T) {
	port := freePort(t, "tcp")
	file := filepath.Join(t.TempDir(), "page.txt")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	startAgnhost(t, "test-webserver", fmt.Sprintf("--port=%d", port))
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", path, got)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get(file); code != http.StatusOK || body != "hello" {
		t.Errorf("%s: %d %q", file, code, body)
	}
	if code, body := get("/localhost.crt"); code != http.StatusOK || !strings.HasPrefix(body, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("/localhost.crt: %d %q", code, body)
	}
	if code, _ := get(file + ".missing"); code != http.StatusNotFound {
		t.Errorf("a missing file: %d", code)
	}
}

// netexec --delay-shutdown goes on serving after SIGTERM but says it is
// not ready, which upstream's e2e tests of terminating endpoints wait for.
func TestNetexecUnreadyWhileShuttingDown(t *testing.T) {
	port := freePort(t, "tcp")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agnhost(ctx, []string{"netexec", fmt.Sprintf("--http-port=%d", port), "--udp-port=-1", "--delay-shutdown=1"})
	}()
	get := func(path string) string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return fmt.Sprintf("%d %s", resp.StatusCode, body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	if got := get("/readyz"); got != "200 ok" {
		t.Errorf("/readyz before SIGTERM: %q", got)
	}
	cancel() // as SIGTERM
	if got := get("/readyz"); got != "503 shutting down" {
		t.Errorf("/readyz after SIGTERM: %q, want 503 shutting down", got)
	}
	if got := get("/healthz"); got != "200 ok" {
		t.Errorf("/healthz after SIGTERM: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// agnhost connect answers with the prefix upstream's e2e tests check: a
// listening port connects, a closed one is REFUSED (TCP, and UDP by the
// ICMP answer), a bad address UNKNOWN.
func TestAgnhostConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().String()
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"connect", "--timeout=3s", open}, ""},
		{[]string{"connect", "--timeout=3s", refused}, "REFUSED"},
		{[]string{"connect", "--timeout=3s", "--protocol=udp", refused}, "REFUSED"},
		{[]string{"connect", "no-port"}, "UNKNOWN: "},
	} {
		err := agnhost(context.Background(), c.args)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("agnhost %v: %v, want a connection", c.args, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("agnhost %v: %v, want %s", c.args, err, c.want)
		}
	}
}

// agnhost porter answers each SERVE_*_PORT_N variable's value on port N:
// HTTP, HTTPS (a localhost certificate where the image's files are
// missing), UDP, and --json-response's object of method and value.
func TestAgnhostPorter(t *testing.T) {
	httpPort, tlsPort, udpPort := freePort(t, "tcp"), freePort(t, "tcp"), freePort(t, "udp")
	t.Setenv(fmt.Sprintf("SERVE_PORT_%d", httpPort), "foo")
	t.Setenv(fmt.Sprintf("SERVE_TLS_PORT_%d", tlsPort), "tls baz")
	t.Setenv(fmt.Sprintf("SERVE_UDP_PORT_%d", udpPort), "udp qux")
	t.Chdir(t.TempDir()) // no localhost.crt here
	startAgnhost(t, "porter", "--json-response")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test certificate
	for url, want := range map[string]string{
		fmt.Sprintf("http://127.0.0.1:%d/", httpPort):  `{"Method":"GET","Body":"foo"}`,
		fmt.Sprintf("https://127.0.0.1:%d/x", tlsPort): `{"Method":"GET","Body":"tls baz"}`,
	} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("GET %s: %q, want %q", url, body, want)
		}
	}
	conn, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", udpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "udp qux" {
		t.Errorf("UDP answer %q (%v), want %q", buf[:n], err, "udp qux")
	}
}

// agnhost dns-suffix and dns-server-list read the first search and
// nameserver lines of resolv.conf, which upstream's pod dnsConfig test
// compares with the pod's spec.
func TestResolvConfFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "resolv.conf")
	conf := "nameserver 1.1.1.1\nnameserver 10.96.0.10\nsearch resolv.conf.local ns.svc.cluster.local\noptions ndots:2\n"
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"search": "resolv.conf.local,ns.svc.cluster.local", "nameserver": "1.1.1.1"} {
		got, err := resolvConfFirst(file, key)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%s: %q %v, want %q", key, got, err, want)
		}
	}
	if _, err := resolvConfFirst(file, "domain"); err == nil {
		t.Error("no domain line: no error")
	}
}

// agnhost mounttest prints what upstream's volume tests match, in its
// words: the new file written with its mode whatever the umask, its
// permissions, mode, owner and content.
func TestMounttest(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "new")
	// A umask that would take the file's group and world bits: mounttest
	// clears it, as agnhost's does.
	umask := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(umask) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = agnhost(context.Background(), []string{"mounttest", "--new_file_0644=" + file, "--file_perm=" + file, "--file_mode=" + dir, "--file_owner=" + file, "--fs_type=" + dir})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatalf("mounttest: %v\n%s", err, out)
	}
	for _, want := range []string{
		fmt.Sprintf("content of file %q: mount-tester new file\n", file),
		fmt.Sprintf("perms of file %q: -rw-r--r--\n", file),
		fmt.Sprintf("mode of file %q: d", dir),
		fmt.Sprintf("owner UID of %q: %d\n", file, os.Getuid()),
		fmt.Sprintf("mount type of %q: ", dir),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("mounttest printed\n%s\nwant %q", out, want)
		}
	}
	if err := agnhost(context.Background(), []string{"mounttest", "--file_content=" + filepath.Join(dir, "missing")}); err == nil {
		t.Error("mounttest of a missing file: no error")
	}
}

// netexec --udp-listen-addresses listens for UDP on each address once
// (a host-network endpoint's HOST_IP and POD_IPS are the same address).
func TestNetexecUDPListenAddresses(t *testing.T) {
	udpPort := freePort(t, "udp")
	startAgnhost(t, "netexec", fmt.Sprintf("--http-port=%d", freePort(t, "tcp")), fmt.Sprintf("--udp-port=%d", udpPort), "--udp-listen-addresses=127.0.0.1,127.0.0.1")
	conn, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", udpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("echo hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Errorf("UDP echo: %q (%v)", buf[:n], err)
	}
	// serverport answers the port the command came to, as upstream's
	// conntrack test reads it.
	if _, err := conn.Write([]byte("serverport")); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != strconv.Itoa(udpPort) {
		t.Errorf("UDP serverport: %q (%v), want %d", buf[:n], err, udpPort)
	}

	if err := agnhost(context.Background(), []string{"netexec", "--udp-listen-addresses=nope"}); err == nil || !strings.Contains(err.Error(), "invalid address nope") {
		t.Errorf("a bad address: %v", err)
	}
}

// agnhost grpc-health-checking answers gRPC's health checks as upstream's
// gRPC probe tests expect: SERVING, NOT_SERVING once /make-not-serving is
// called, SERVING again after /make-serving, NOT_FOUND for another name.
func TestGRPCHealthChecking(t *testing.T) {
	port, httpPort := freePort(t, "tcp"), freePort(t, "tcp")
	startAgnhost(t, "grpc-health-checking", fmt.Sprintf("--port=%d", port), fmt.Sprintf("--http-port=%d", httpPort))
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	check := func(service string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			return status.Code(err).String()
		}
		return resp.Status.String()
	}
	control := func(path string) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", httpPort, path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := check(""); got != "SERVING" {
		t.Errorf("at start: %s", got)
	}
	if got := check("other"); got != "NotFound" {
		t.Errorf("another service: %s", got)
	}
	control("/make-not-serving")
	if got := check(""); got != "NOT_SERVING" {
		t.Errorf("after /make-not-serving: %s", got)
	}
	control("/make-serving")
	if got := check(""); got != "SERVING" {
		t.Errorf("after /make-serving: %s", got)
	}
}

// agnhost logs-generator writes its lines in klog's format, numbered,
// which upstream's kubectl logs tests count and filter.
func TestLogsGenerator(t *testing.T) {
	var b strings.Builder
	if err := generateLogs(context.Background(), &b, 3, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), b.String())
	}
	for i, l := range lines {
		if !regexp.MustCompile(fmt.Sprintf(`^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ logs_generator\.go:67\] %d (GET|POST|PUT) /api/v1/namespaces/[a-z-]+/pods/\w{3,4} \d{3}$`, i)).MatchString(l) {
			t.Errorf("line %d: %q", i, l)
		}
	}
	if err := agnhost(context.Background(), []string{"logs-generator", "--log-lines-total", "0", "--run-duration", "1s"}); err == nil {
		t.Error("no lines: no error")
	}
}

// agnhost pause, the image's default command, says "Paused", and on
// SIGTERM leaves why it ended in its termination message file and ends
// with 2, as upstream's: conformance tests read both.
func TestAgnhostPause(t *testing.T) {
	if os.Getenv("SVCNET_TEST_AGNHOST_PAUSE") == "1" {
		agnhostPause()
		return
	}
	msgFile := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(msgFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAgnhostPause$")
	cmd.Env = append(os.Environ(), "SVCNET_TEST_AGNHOST_PAUSE=1", "TERMINATION_MESSAGE_PATH="+msgFile)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	for _, want := range []string{"Paused\n", "Signals registered\n"} {
		if line, err := r.ReadString('\n'); line != want {
			t.Fatalf("agnhost pause said %q (%v), want %q", line, err, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	err = cmd.Wait()
	const said = "exiting because of signal \"terminated\"\n"
	if code := cmd.ProcessState.ExitCode(); code != 2 || string(rest) != said {
		t.Fatalf("after SIGTERM: exit %d (%v), said %q; want exit 2 and %q", code, err, rest, said)
	}
	if b, _ := os.ReadFile(msgFile); string(b) != said {
		t.Fatalf("termination message %q, want %q", b, said)
	}
}

// netexec logs each request as upstream's does; upstream's lifecycle hook
// tests look for their hooks' requests in that log.
func TestNetexecLogsRequests(t *testing.T) {
	var buf strings.Builder
	log.SetOutput(&buf)
	flags := log.Flags()
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(os.Stderr); log.SetFlags(flags) })
	h := logNetexec(http.NotFoundHandler())
	for _, tc := range []struct{ target, want string }{
		{"/echo?msg=poststart", "GET /echo?msg=poststart&code="},
		{"/header?key=X-Test", "GET /header?key=X-Test"},
		{"/header", "GET /header"},
		{"/hostname", "GET /hostname"},
		{"/redirect?location=/echo&code=302", "GET /redirect?msg=/echo&code=302"},
	} {
		buf.Reset()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, tc.target, nil))
		if got := strings.TrimSpace(buf.String()); got != tc.want {
			t.Errorf("GET %s logged %q, want %q", tc.target, got, tc.want)
		}
	}
}

// agnhost entrypoint-tester prints its argv, its name as the container
// started it first: upstream's tests tell /agnhost from /agnhost-2 by it.
func TestEntrypointTester(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	for _, name := range []string{"/agnhost-2", ""} {
		if err := agnhost(withArgv0(context.Background(), name), []string{"entrypoint-tester", "override", "arguments"}); err != nil {
			t.Error(err)
		}
	}
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if want := "[/agnhost-2 entrypoint-tester override arguments]\n[/agnhost entrypoint-tester override arguments]\n"; string(out) != want {
		t.Fatalf("printed %q, want %q", out, want)
	}
}

// agnhost liveness is healthy for its first 10 seconds, then answers 500,
// which upstream's probe tests restart it for.
func TestLiveness(t *testing.T) {
	started := time.Now()
	now := started
	h := livenessHandler(started, func() time.Time { return now })
	get := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Fatalf("/healthz at start: %d %q", code, body)
	}
	now = started.Add(11 * time.Second)
	if code, body := get("/healthz"); code != 500 || body != "error: 11" {
		t.Fatalf("/healthz after 11s: %d %q", code, body)
	}
	if code, body := get("/started"); code != 200 || body != "11s" {
		t.Fatalf("/started: %d %q", code, body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/redirect?loc=%2Fhealthz", nil))
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/healthz" {
		t.Fatalf("/redirect: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
}

// netexec's /dial makes each try on a connection of its own, so that a
// Service's endpoints are chosen anew each time.
func TestNetexecDialNewConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		fmt.Fprint(w, "target")
	}))
	defer target.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(target.URL, "http://"))
	netexec := freePort(t, "tcp")
	startAgnhost(t, "netexec", fmt.Sprintf("--http-port=%d", netexec), "--udp-port=-1")
	for range 3 {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/dial?request=hostname&protocol=http&host=%s&port=%s&tries=2", netexec, host, port))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"responses":["target","target"]`) {
			t.Fatalf("/dial: %s", body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 6 {
		t.Errorf("6 tries came on %d connections, want 6", len(conns))
	}
}

// agnhost net's CLOSE_WAIT runners: the server half-closes the client's
// connection, the client sees the FIN and keeps its end open, both end
// after their post-FIN time.
func TestAgnhostNetCloseWait(t *testing.T) {
	port := freePort(t, "tcp")
	errs := make(chan error, 2)
	go func() {
		errs <- agnhost(context.Background(), []string{"net", "--runner", "nat-closewait-server",
			"--options", fmt.Sprintf(`{"LocalAddr":"127.0.0.1:%d", "PostFinTimeoutSeconds":1}`, port)})
	}()
	eventuallyListening(t, port)
	start := time.Now()
	go func() {
		errs <- agnhost(context.Background(), []string{"net", "--runner", "nat-closewait-client",
			"--options", fmt.Sprintf(`{"RemoteAddr":"127.0.0.1:%d", "PostFinTimeoutSeconds":1, "TimeoutSeconds":5, "LeakConnection":true}`, port)})
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < time.Second || took > 5*time.Second {
		t.Errorf("the runners took %s, want their post-FIN second", took)
	}
	if err := agnhost(context.Background(), []string{"net", "--runner", "nope", "--options", "{}"}); err == nil {
		t.Error("an unknown runner ran")
	}
}

// eventuallyListening waits for a TCP listener on the port without
// touching it: until /proc/net/tcp lists the port in state LISTEN (0A).
func eventuallyListening(t *testing.T, port int) {
	t.Helper()
	want := fmt.Sprintf(":%04X", port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %d", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
