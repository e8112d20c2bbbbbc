package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/net/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// terminal is kubectl running on a pseudo-terminal, as a person types
// into it.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

// kubectlTTY starts kubectl with args on a new terminal.
func (c *cluster) kubectlTTY(args ...string) *terminal {
	c.t.Helper()
	cmd := exec.Command(kubectlPath, append([]string{"--cache-dir", c.cacheDir}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig(), "HOME="+c.cacheDir, "TERM=dumb")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		c.t.Fatalf("start kubectl on a terminal: %v", err)
	}
	term := &terminal{t: c.t, cmd: cmd, tty: tty, done: make(chan error, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				break
			}
		}
		term.done <- cmd.Wait()
	}()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = tty.Close()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// expect waits for text to appear on the terminal.
func (term *terminal) expect(text string, timeout time.Duration) {
	term.t.Helper()
	eventually(term.t, timeout, func() string {
		if !strings.Contains(term.screen(), text) {
			return fmt.Sprintf("terminal does not show %q:\n%s", text, term.screen())
		}
		return ""
	})
}

func (term *terminal) typeLine(line string) {
	term.t.Helper()
	if _, err := io.WriteString(term.tty, line+"\r"); err != nil {
		term.t.Fatalf("type %q: %v", line, err)
	}
}

// exit waits for kubectl to end and returns its exit error.
func (term *terminal) exit(timeout time.Duration) error {
	term.t.Helper()
	select {
	case err := <-term.done:
		return err
	case <-time.After(timeout):
		term.t.Fatalf("kubectl still runs after %s:\n%s", timeout, term.screen())
		return nil
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestStreamExec: kubectl exec over WebSocket (kubectl's default) and
// over SPDY (its fallback) runs commands in the pod's namespaces and
// exits with the command's code; an interactive shell on a terminal runs
// two commands.
func TestStreamExec(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.pod("web", "nginx", "    ports: [{containerPort: 80}]")
	c.waitReady("web", "True", 60*time.Second)

	for _, env := range [][]string{nil, {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false"}} {
		out, err := c.kubectlEnv(env, "exec", "web", "--", "cat", "/etc/resolv.conf")
		if err != nil || !strings.Contains(out, "nameserver 10.96.0.10") || !strings.Contains(out, "search default.svc.cluster.local") {
			t.Fatalf("%v exec cat /etc/resolv.conf: %v\n%s", env, err, out)
		}
		out, err = c.kubectlEnv(env, "exec", "web", "--", "sh", "-c", "exit 3")
		if exitCode(err) != 3 {
			t.Fatalf("%v exec sh -c 'exit 3': exit code %d (%v), want 3\n%s", env, exitCode(err), err, out)
		}
		out, err = c.kubectlEnv(env, "exec", "web", "--", "hostname")
		if err != nil || strings.TrimSpace(out) != "web" {
			t.Fatalf("%v exec hostname = %q (%v), want the pod's name", env, out, err)
		}
	}
	if out, err := c.kubectl("echo from-stdin", "exec", "-i", "web", "--", "cat"); err != nil || out != "echo from-stdin" {
		t.Fatalf("exec -i cat = %q (%v), want the input back", out, err)
	}
	if out := c.fails("exec", "web", "-c", "nope", "--", "true"); !strings.Contains(out, "container nope is not valid for pod web") {
		t.Fatalf("exec into a missing container: %s", out)
	}

	term := c.kubectlTTY("exec", "-it", "web", "--", "sh")
	term.typeLine("echo sum-$((20+22))")
	term.expect("sum-42", 20*time.Second)
	term.typeLine("stty size")
	term.expect("40 120", 20*time.Second)
	term.typeLine("exit 5")
	if err := term.exit(20 * time.Second); exitCode(err) != 5 {
		t.Fatalf("interactive exec ended with %v, want exit code 5:\n%s", err, term.screen())
	}
}

// TestStreamRunInteractive: `kubectl run --rm -it --image=busybox` attaches
// to the container's terminal, runs what is typed, and deletes the pod
// once the shell exits.
func TestStreamRunInteractive(t *testing.T) {
	t.Parallel()
	c, _ := startClusterWithUpstream(t)
	c.must("create", "deployment", "nginx", "--image=nginx", "--port=80")
	c.withStdin(seedManifest, "apply", "-f", "-")
	c.must("rollout", "status", "deployment/nginx", "--timeout=60s")
	c.readyEndpoints("nginx", 1)
	term := c.kubectlTTY("run", "tmp", "--rm", "-it", "--restart=Never", "--image=busybox", "--", "sh")
	term.expect("If you don't see a command prompt, try pressing enter.", 60*time.Second)
	term.typeLine("echo sum-$((40+2))")
	term.expect("sum-42", 20*time.Second)
	term.typeLine("cat /etc/hostname")
	term.expect("\ntmp", 20*time.Second)
	// Cluster DNS, and a Service by its short name through the search
	// path. busybox's own nslookup (after 1.28) ignores the search list, on
	// any cluster, so it gets the full name; wget resolves through libc,
	// which applies search and ndots.
	term.typeLine("nslookup kubernetes.default.svc.cluster.local")
	term.expect("Address: 10.96.0.1", 20*time.Second)
	term.typeLine("wget -qO- http://nginx:8080")
	term.expect("Welcome to nginx!", 20*time.Second)
	term.typeLine("exit 0")
	if err := term.exit(60 * time.Second); err != nil {
		t.Fatalf("kubectl run -it: %v\n%s", err, term.screen())
	}
	if s := term.screen(); !strings.Contains(s, `pod "tmp" deleted`) {
		t.Errorf("kubectl run --rm did not say the pod was deleted:\n%s", s)
	}
	eventually(t, 30*time.Second, func() string {
		if out, err := c.kubectl("", "get", "pod", "tmp"); err == nil || !strings.Contains(out, "NotFound") {
			return "pod tmp still exists: " + out
		}
		return ""
	})
}

// TestStreamPortForward: kubectl port-forward to a pod and to a Service,
// over WebSocket and over SPDY, answers GETs on the local port from the
// pod's nginx.
func TestStreamPortForward(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.pod("web", "nginx", "    ports: [{containerPort: 80}]")
	c.must("expose", "pod", "web", "--name", "nginx", "--port", "8080", "--target-port", "80")
	c.waitReady("web", "True", 60*time.Second)

	for _, tc := range []struct {
		target, remote string
		env            []string
	}{
		{"pod/web", "80", nil},
		{"svc/nginx", "8080", nil},
		{"pod/web", "80", []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		local := freePort(t)
		cmd := exec.Command(kubectlPath, "--cache-dir", c.cacheDir, "port-forward", tc.target, fmt.Sprintf("%d:%s", local, tc.remote))
		cmd.Env = append(append(os.Environ(), "KUBECONFIG="+c.kubeconfig(), "HOME="+c.cacheDir), tc.env...)
		var out lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, func() string {
			// A Service's port is shown as the pod's port it maps to.
			if !strings.Contains(out.String(), fmt.Sprintf("Forwarding from 127.0.0.1:%d -> 80", local)) {
				return "kubectl port-forward not ready: " + out.String()
			}
			return ""
		})
		for range 2 {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", local))
			if err != nil {
				t.Fatalf("%s %v: GET through port-forward: %v\n%s", tc.target, tc.env, err, out.String())
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nginx") {
				t.Fatalf("%s %v: GET through port-forward = %d %q", tc.target, tc.env, resp.StatusCode, body)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStreamDebug: `kubectl debug` adds ephemeral containers to a running
// pod through pods/ephemeralcontainers: one runs a command whose output
// `kubectl logs -c` shows and into which `kubectl exec -c` runs, another
// is a shell on the user's terminal; each shows in the pod's
// ephemeralContainerStatuses, the first write moves the pod to
// generation 2, and none can be removed.
func TestStreamDebug(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t)
	c.pod("web", "nginx", "    ports: [{containerPort: 80}]")
	c.waitReady("web", "True", 60*time.Second)

	c.must("debug", "web", "--image=busybox", "--container=poller", "--", "sh", "-c", "while true; do echo polo; sleep 1; done")
	eventually(t, 60*time.Second, func() string {
		if out, err := c.kubectl("", "logs", "web", "-c", "poller"); err != nil || !strings.Contains(out, "polo") {
			return fmt.Sprintf("logs of the ephemeral container: %v %s", err, out)
		}
		return ""
	})
	// The log over a WebSocket, as upstream's conformance test reads it.
	if got := c.websocketLog("web", "poller"); !strings.HasPrefix(got, "polo\n") {
		t.Fatalf("the ephemeral container's log over a WebSocket = %q, want polo lines", got)
	}
	if out := c.must("exec", "web", "-c", "poller", "--", "echo", "marco"); strings.TrimSpace(out) != "marco" {
		t.Fatalf("exec in the ephemeral container = %q, want marco", out)
	}
	if gen := c.must("get", "pod", "web", "-o", "jsonpath={.metadata.generation}"); gen != "2" {
		t.Fatalf("generation after adding an ephemeral container = %s, want 2", gen)
	}
	if state := c.must("get", "pod", "web", "-o", `jsonpath={.status.ephemeralContainerStatuses[?(@.name=="poller")].state.running.startedAt}`); state == "" {
		t.Fatalf("ephemeral container poller not running in the pod's status")
	}

	term := c.kubectlTTY("debug", "-it", "web", "--image=busybox", "--container=shell", "--", "sh")
	term.expect("If you don't see a command prompt, try pressing enter.", 60*time.Second)
	term.typeLine("echo sum-$((40+2))")
	term.expect("sum-42", 20*time.Second)
	term.typeLine("exit 7")
	_ = term.exit(30 * time.Second)
	eventually(t, 30*time.Second, func() string {
		code := c.must("get", "pod", "web", "-o", `jsonpath={.status.ephemeralContainerStatuses[?(@.name=="shell")].state.terminated.exitCode}`)
		if code != "7" {
			return "exit code of the ephemeral shell in the pod's status: " + code
		}
		return ""
	})
	// It is not started again: an ephemeral container runs once.
	if n := c.must("get", "pod", "web", "-o", `jsonpath={.status.ephemeralContainerStatuses[?(@.name=="shell")].restartCount}`); n != "0" {
		t.Fatalf("restartCount of the ended ephemeral shell = %s, want 0", n)
	}

	out := c.fails("patch", "pod", "web", "--subresource=ephemeralcontainers", "--type=json", "-p", `[{"op":"remove","path":"/spec/ephemeralContainers/0"}]`)
	if !strings.Contains(out, `existing ephemeral containers "poller" may not be removed`) {
		t.Fatalf("removing an ephemeral container: %s", out)
	}
	out = c.fails("debug", "web", "--image=busybox", "--container=main", "--", "true")
	if !strings.Contains(out, `spec.ephemeralContainers[2].name: Duplicate value: "main"`) {
		t.Fatalf("an ephemeral container named as a container: %s", out)
	}
}

// websocketLog reads the first 10 bytes of a container's log through
// pods/log upgraded to a WebSocket (protocol binary.k8s.io), with the
// credentials of the cluster's kubeconfig.
func (c *cluster) websocketLog(pod, container string) string {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		c.t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	u := strings.Replace(cfg.Host, "https://", "wss://", 1) +
		"/api/v1/namespaces/default/pods/" + pod + "/log?limitBytes=10&container=" + container
	wcfg, err := websocket.NewConfig(u, "http://localhost")
	if err != nil {
		c.t.Fatal(err)
	}
	wcfg.TlsConfig, wcfg.Protocol = tlsConfig, []string{"binary.k8s.io"}
	if cfg.BearerToken != "" {
		wcfg.Header = http.Header{"Authorization": {"Bearer " + cfg.BearerToken}}
	}
	ws, err := websocket.DialConfig(wcfg)
	if err != nil {
		c.t.Fatalf("open a WebSocket to %s: %v", u, err)
	}
	defer ws.Close()
	var out []byte
	for {
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return string(out)
		}
		out = append(out, msg...)
	}
}
