package logs

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct{ function, file, want string }{
		{"github.com/svcnet/svcnet/internal/apiserver.(*Server).ServeHTTP", "/src/internal/apiserver/server.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/registry/pod.Strategy.Validate", "/src/internal/registry/pod/pod.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/storage.(*Store).RunCompactor.func1", "/src/internal/storage/compact.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/controlplane.(*Repair).Run", "/src/internal/controlplane/repair.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/cluster.StartAPIServer", "/src/internal/cluster/apiserver.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/cluster.StartAPIServer", "github.com/svcnet/svcnet/internal/cluster/apiserver.go", KubeAPIServer},
		{"github.com/svcnet/svcnet/internal/controller/scheduler.(*Scheduler).Run", "/src/internal/controller/scheduler/scheduler.go", KubeScheduler},
		{"github.com/svcnet/svcnet/internal/controller.(*Queue[...]).Run", "/src/internal/controller/controller.go", KubeControllerManager},
		{"github.com/svcnet/svcnet/internal/controller/endpointslice.(*Controller).sync", "/src/internal/controller/endpointslice/x.go", KubeControllerManager},
		{"github.com/svcnet/svcnet/internal/cluster.lead.func2", "/src/internal/cluster/controllermanager.go", KubeControllerManager},
		{"github.com/svcnet/svcnet/internal/proxy.Run", "/src/internal/proxy/proxier.go", KubeProxy},
		{"github.com/svcnet/svcnet/internal/proxy/userspace.(*Backend).Sync", "/src/internal/proxy/userspace/userspace.go", KubeProxy},
		{"github.com/svcnet/svcnet/internal/cluster.runProxy", "/src/internal/cluster/proxy.go", KubeProxy},
		// Not a component's: the node agent, the assembly of up, shared
		// helpers, other modules.
		{"github.com/svcnet/svcnet/internal/node.(*Agent).run", "/src/internal/node/agent.go", ""},
		{"github.com/svcnet/svcnet/internal/cluster.Up", "/src/internal/cluster/up.go", ""},
		{"github.com/svcnet/svcnet/internal/controllerx.F", "/src/internal/controllerx/x.go", ""},
		{"github.com/svcnet/svcnet/internal/httpserve.ServeTLS", "/src/internal/httpserve/httpserve.go", ""},
		{"k8s.io/client-go/tools/cache.(*Reflector).ListAndWatch", "/mod/k8s.io/client-go/tools/cache/reflector.go", ""},
		{"", "", ""},
	} {
		if got := classify(tc.function, tc.file); got != tc.want {
			t.Errorf("classify(%q, %q) = %q, want %q", tc.function, tc.file, got, tc.want)
		}
	}
}

// The PCs of the fake code locations the router test logs from.
const (
	pcAPIServer uintptr = iota + 1
	pcControllers
	pcProxy
	pcAgent
)

func testRouter(console *bytes.Buffer) *Router {
	r := NewRouter(NewConsoleHandler(console, slog.LevelInfo))
	r.shared.classify = func(pc uintptr) string {
		return map[uintptr]string{pcAPIServer: KubeAPIServer, pcControllers: KubeControllerManager, pcProxy: KubeProxy}[pc]
	}
	return r
}

func logAt(h slog.Handler, pc uintptr, level slog.Level, msg string, args ...any) {
	r := slog.NewRecord(time.Now(), level, msg, pc)
	r.Add(args...)
	if h.Enabled(context.Background(), level) {
		_ = h.Handle(context.Background(), r)
	}
}

// lines are the contents of the CRI records in a component log, checking
// their form.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	record := regexp.MustCompile(`^(\S+) stderr F (.*)$`)
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		m := record.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("%s: not a CRI record: %q", path, l)
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Fatalf("%s: record time: %v", path, err)
		}
		out = append(out, stripTime(m[2]))
	}
	return out
}

var consoleStamp = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)

func stripTime(l string) string { return consoleStamp.ReplaceAllString(l, "") }

func TestRouter(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) *File {
		f, err := Create(filepath.Join(dir, name), MaxFileSize)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	var console bytes.Buffer
	r := testRouter(&console)
	api, cm, sched, proxyA, proxyB := open("api.log"), open("cm.log"), open("sched.log"), open("proxy-a.log"), open("proxy-b.log")
	r.Route(KubeAPIServer, "", api)
	r.Route(KubeControllerManager, "", cm)
	r.Route(KubeScheduler, "", sched)
	r.Route(KubeProxy, "a", proxyA)
	unrouteB := r.Route(KubeProxy, "b", proxyB)

	logAt(r, pcAPIServer, slog.LevelInfo, "API server serving", "url", "https://127.0.0.1:6443")
	logAt(r, pcAPIServer, slog.LevelDebug, "too fine for stderr, so for the file too")
	logAt(r, pcAgent, slog.LevelInfo, "node agent running", "node", "a")
	logAt(r, pcControllers, slog.LevelInfo, "starting controller", "controller", "deployment", "workers", 5)
	logAt(r, pcControllers, slog.LevelInfo, "starting controller", "controller", "scheduler", "workers", 16)
	logAt(r, pcProxy, slog.LevelInfo, "service proxy running", "node", "a")
	withNode := r.WithAttrs([]slog.Attr{slog.String("node", "b")})
	logAt(withNode, pcProxy, slog.LevelWarn, "cannot listen", "address", "10.0.0.1:80")
	logAt(withNode.WithGroup("g"), pcProxy, slog.LevelInfo, "grouped", "k", "v")
	logAt(r, pcProxy, slog.LevelInfo, "no node: stderr only")
	unrouteB()
	logAt(withNode, pcProxy, slog.LevelInfo, "after unroute")

	want := map[string][]string{
		"api.log":     {`INFO API server serving url=https://127.0.0.1:6443`},
		"cm.log":      {`INFO starting controller controller=deployment workers=5`},
		"sched.log":   {`INFO starting controller controller=scheduler workers=16`},
		"proxy-a.log": {`INFO service proxy running node=a`},
		"proxy-b.log": {`WARN cannot listen node=b address=10.0.0.1:80`, `INFO grouped node=b g.k=v`},
	}
	for name, w := range want {
		if got := lines(t, filepath.Join(dir, name)); strings.Join(got, "\n") != strings.Join(w, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSuffix(console.String(), "\n"), "\n") {
		if !consoleStamp.MatchString(l) {
			t.Errorf("console line without the log package's time: %q", l)
		}
		got = append(got, stripTime(l))
	}
	wantConsole := []string{
		`INFO API server serving url=https://127.0.0.1:6443`,
		`INFO node agent running node=a`,
		`INFO starting controller controller=deployment workers=5`,
		`INFO starting controller controller=scheduler workers=16`,
		`INFO service proxy running node=a`,
		`WARN cannot listen node=b address=10.0.0.1:80`,
		`INFO grouped node=b g.k=v`,
		`INFO no node: stderr only`,
		`INFO after unroute node=b`,
	}
	if strings.Join(got, "\n") != strings.Join(wantConsole, "\n") {
		t.Errorf("console:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantConsole, "\n"))
	}
}

func TestConsoleFormat(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(NewConsoleHandler(&b, slog.LevelInfo))
	l.Info("plain")
	l.With("a", 1).WithGroup("g").Error("quoted", "msg", "two words", "err", os.ErrNotExist)
	l.Debug("dropped")
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{"INFO plain", `ERROR quoted a=1 g.msg="two words" g.err="file does not exist"`}
	if len(got) != len(want) {
		t.Fatalf("console: %q", b.String())
	}
	for i := range want {
		if !consoleStamp.MatchString(got[i]) || stripTime(got[i]) != want[i] {
			t.Errorf("line %d: %q, want <time> %s", i, got[i], want[i])
		}
	}
}

func TestFileRotatesAndSplitsLongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	if err := os.WriteFile(path+".1", []byte("an earlier run's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("an earlier run's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 300)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".1"); !os.IsNotExist(err) {
		t.Errorf("Create left the earlier run's rotated log: %v", err)
	}
	if got := lines(t, path); len(got) != 0 {
		t.Errorf("Create kept the earlier run's log: %q", got)
	}
	for i := range 10 {
		if _, err := f.Write([]byte(strings.Repeat("x", 20) + string(rune('0'+i)) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	// Two writes, one line.
	_, _ = f.Write([]byte("par"))
	_, _ = f.Write([]byte("ted\n"))
	old, cur := lines(t, path+".1"), lines(t, path)
	if len(old) == 0 || len(cur) == 0 || len(old)+len(cur) > 11 {
		t.Fatalf("rotation: %d + %d lines", len(old), len(cur))
	}
	if cur[len(cur)-1] != "parted" {
		t.Errorf("last line %q, want parted", cur[len(cur)-1])
	}
	for _, p := range []string{path, path + ".1"} {
		if fi, _ := os.Stat(p); fi.Size() > 300 {
			t.Errorf("%s has %d bytes, more than the 300 allowed", p, fi.Size())
		}
	}

	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("late\n")); err == nil {
		t.Error("write after Close succeeded")
	}

	path = filepath.Join(t.TempDir(), "long.log")
	if f, err = Create(path, 0); err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte(strings.Repeat("y", LineMax+10) + "\nlast"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	recs := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if n := len(recs); n < 3 || !strings.Contains(recs[n-3], " stderr P ") || !strings.HasSuffix(recs[n-2], " stderr F "+strings.Repeat("y", 10)) || !strings.HasSuffix(recs[n-1], " stderr F last") {
		t.Errorf("long line and unterminated end: %q", recs)
	}
}

func TestInstallOnce(t *testing.T) {
	old, oldOut, oldFlags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(old)
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
	})
	r := Install()
	if slog.Default().Handler() != r {
		t.Fatal("Install did not make the Router the default handler")
	}
	if again := Install(); again != r {
		t.Error("a second Install made another Router")
	}
}
