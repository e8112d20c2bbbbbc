// Package logs gives each of svcnet's components a log of its own beside
// the process's stderr. `svcnet up` runs the API server, etcd, the
// controller manager, the scheduler and every node's Service proxy in one
// process, all logging through log/slog's default logger (etcd through its
// own zap logger, which the cluster points at etcd's File); upstream runs them
// as static pods, and `kubectl logs -n kube-system kube-apiserver-<node>`
// shows that one component's log. Router is that default logger's handler:
// every record still goes to stderr, as before, and a record of a
// component's code also goes to the component's File, in the CRI log
// format the node agent serves container logs from.
//
// The component is found from the code that logged, the function at the
// record's PC (see rules), so that no component needs a logger handed to
// it to be routed; the proxy's records name their node in a "node"
// attribute, which picks that node's proxy log. Records of other code
// (client-go through klog, the node agent, shared helpers) stay on stderr.
package logs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
)

// The components that log to files of their own, named as their
// containers in kubeadm's static pods.
const (
	KubeAPIServer         = "kube-apiserver"
	Etcd                  = "etcd"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	KubeProxy             = "kube-proxy"
)

// nodeKey is the attribute that names a proxy's node.
const nodeKey = "node"

// Router is a slog.Handler that writes every record to its console handler
// and, for a component's records, also to that component's log.
type Router struct {
	console slog.Handler
	shared  *routes
	// ops are the WithAttrs and WithGroup calls that made this handler,
	// replayed on the handlers of the component logs.
	ops []func(slog.Handler) slog.Handler
	// node is a "node" attribute given to WithAttrs outside any group;
	// grouped says a group is open, so that record attributes are not
	// top-level.
	node    string
	grouped bool
	// handlers are the component logs' handlers with ops applied.
	handlers *sync.Map // *destination → slog.Handler
}

// routes are the component logs, shared by a Router and its clones.
type routes struct {
	mu    sync.RWMutex
	dests map[destKey]*destination
	// classify names the component of the code at a PC ("" for none).
	classify func(pc uintptr) string
	cache    sync.Map // pc → component
}

type destKey struct{ component, node string }

type destination struct{ h slog.Handler }

// NewRouter routes records to console and to the component logs it is
// given with Route.
func NewRouter(console slog.Handler) *Router {
	return &Router{console: console, shared: &routes{dests: map[destKey]*destination{}, classify: classifyPC}, handlers: &sync.Map{}}
}

// Route sends the component's records (of node's proxy, for KubeProxy) to
// w, formatted as on the console, until the returned func is called.
func (r *Router) Route(component, node string, w io.Writer) (unroute func()) {
	k := destKey{component, node}
	d := &destination{h: NewConsoleHandler(w, slog.LevelDebug)}
	r.shared.mu.Lock()
	r.shared.dests[k] = d
	r.shared.mu.Unlock()
	return func() {
		r.shared.mu.Lock()
		if r.shared.dests[k] == d {
			delete(r.shared.dests, k)
		}
		r.shared.mu.Unlock()
	}
}

// Enabled is the console's: the component logs get what stderr gets.
func (r *Router) Enabled(ctx context.Context, l slog.Level) bool {
	return r.console.Enabled(ctx, l)
}

func (r *Router) Handle(ctx context.Context, rec slog.Record) error {
	err := r.console.Handle(ctx, rec)
	component := r.shared.component(rec.PC)
	if component == "" {
		return err
	}
	node := r.node
	if !r.grouped {
		rec.Attrs(func(a slog.Attr) bool {
			switch {
			case a.Key == nodeKey:
				node = a.Value.String()
			case a.Key == "controller" && component == KubeControllerManager && a.Value.String() == "scheduler":
				// The controllers' shared workqueue logs for the scheduler
				// too, naming it.
				component = KubeScheduler
			}
			return true
		})
	}
	if component != KubeProxy {
		node = ""
	}
	r.shared.mu.RLock()
	d := r.shared.dests[destKey{component, node}]
	r.shared.mu.RUnlock()
	if d == nil {
		return err
	}
	return errors.Join(err, r.handler(d).Handle(ctx, rec))
}

// handler is d's handler with this Router's attributes and groups.
func (r *Router) handler(d *destination) slog.Handler {
	if len(r.ops) == 0 {
		return d.h
	}
	if h, ok := r.handlers.Load(d); ok {
		return h.(slog.Handler)
	}
	h := d.h
	for _, op := range r.ops {
		h = op(h)
	}
	r.handlers.Store(d, h)
	return h
}

func (r *Router) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return r
	}
	c := r.clone(func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })
	c.console = r.console.WithAttrs(as)
	if !r.grouped {
		for _, a := range as {
			if a.Key == nodeKey {
				c.node = a.Value.String()
			}
		}
	}
	return c
}

func (r *Router) WithGroup(name string) slog.Handler {
	if name == "" {
		return r
	}
	c := r.clone(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
	c.console = r.console.WithGroup(name)
	c.grouped = true
	return c
}

func (r *Router) clone(op func(slog.Handler) slog.Handler) *Router {
	c := *r
	c.ops = append(r.ops[:len(r.ops):len(r.ops)], op)
	c.handlers = &sync.Map{}
	return &c
}

func (s *routes) component(pc uintptr) string {
	if pc == 0 {
		return ""
	}
	if c, ok := s.cache.Load(pc); ok {
		return c.(string)
	}
	c := s.classify(pc)
	s.cache.Store(pc, c)
	return c
}

var installMu sync.Mutex

// Install makes a Router writing to stderr slog's default handler (and so
// the log package's), unless one is already; it returns the default
// Router.
func Install() *Router {
	installMu.Lock()
	defer installMu.Unlock()
	if r, ok := slog.Default().Handler().(*Router); ok {
		return r
	}
	r := NewRouter(NewConsoleHandler(os.Stderr, slog.LevelInfo))
	slog.SetDefault(slog.New(r))
	return r
}

// module is the import path prefix of svcnet's packages.
const module = "github.com/svcnet/svcnet/"

// rule names the component of a package (and its subpackages) or of one
// file; the first that matches wins.
type rule struct {
	pkg, file string
	component string
}

// rules say whose code is whose. internal/cluster assembles every
// component, so its files are told apart.
var rules = []rule{
	{pkg: "internal/apiserver", component: KubeAPIServer},
	{pkg: "internal/registry", component: KubeAPIServer},
	{pkg: "internal/storage", component: KubeAPIServer},
	{pkg: "internal/allocator", component: KubeAPIServer},
	{pkg: "internal/controlplane", component: KubeAPIServer},
	{pkg: "internal/openapi", component: KubeAPIServer},
	{file: "internal/cluster/apiserver.go", component: KubeAPIServer},
	{file: "internal/cluster/openapi.go", component: KubeAPIServer},
	{pkg: "internal/controller/scheduler", component: KubeScheduler},
	{pkg: "internal/controller", component: KubeControllerManager},
	{file: "internal/cluster/controllermanager.go", component: KubeControllerManager},
	{pkg: "internal/proxy", component: KubeProxy},
	{file: "internal/cluster/proxy.go", component: KubeProxy},
}

func classifyPC(pc uintptr) string {
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return classify(f.Function, f.File)
}

// classify names the component of a function (its full name, as
// runtime.Frame has it) in file.
func classify(function, file string) string {
	rest, ok := strings.CutPrefix(function, module)
	if !ok {
		return ""
	}
	// The package ends at the first dot after the last slash.
	pkg := rest
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		if j := strings.IndexByte(rest[i:], '.'); j >= 0 {
			pkg = rest[:i+j]
		}
	}
	file = strings.ReplaceAll(file, `\`, "/")
	for _, r := range rules {
		switch {
		case r.pkg != "" && (pkg == r.pkg || strings.HasPrefix(pkg, r.pkg+"/")):
			return r.component
		case r.file != "" && (file == r.file || strings.HasSuffix(file, "/"+r.file)):
			return r.component
		}
	}
	return ""
}
