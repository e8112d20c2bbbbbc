package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeUserAgent is what the kubelet's HTTP probes send.
const probeUserAgent = "kube-probe/1.37"

type probeKind string

const (
	liveness  probeKind = "Liveness"
	readiness probeKind = "Readiness"
	startup   probeKind = "Startup"
)

// probeManager runs one worker per probe of each running container, as the
// kubelet's prober does, and keeps their results.
type probeManager struct {
	agent *Agent

	mu      sync.Mutex
	workers map[probeKey]*probeWorker
	wg      sync.WaitGroup
}

type probeKey struct {
	dir  string // the container run
	kind probeKind
}

type probeWorker struct {
	uid    types.UID
	cancel context.CancelFunc

	mu     sync.Mutex
	result probeResult
	output string
}

type probeResult int

const (
	resultUnknown probeResult = iota
	resultSuccess
	resultFailure
)

func newProbeManager(a *Agent) *probeManager {
	return &probeManager{agent: a, workers: map[probeKey]*probeWorker{}}
}

// ensure starts the workers of a running container's probes.
func (m *probeManager) ensure(pod *corev1.Pod, spec *corev1.Container, c *container, podIP string) {
	for kind, p := range map[probeKind]*corev1.Probe{liveness: spec.LivenessProbe, readiness: spec.ReadinessProbe, startup: spec.StartupProbe} {
		if p == nil {
			continue
		}
		key := probeKey{dir: c.dir, kind: kind}
		m.mu.Lock()
		if _, ok := m.workers[key]; ok {
			m.mu.Unlock()
			continue
		}
		ctx, cancel := context.WithCancel(m.agent.runCtx)
		w := &probeWorker{uid: pod.UID, cancel: cancel}
		m.workers[key] = w
		m.mu.Unlock()
		m.wg.Go(func() { m.run(ctx, w, key, pod, spec, c, p, podIP) })
	}
}

func (m *probeManager) get(c *container, kind probeKind) (probeResult, string) {
	m.mu.Lock()
	w, ok := m.workers[probeKey{dir: c.dir, kind: kind}]
	m.mu.Unlock()
	if !ok {
		return resultUnknown, ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.result, w.output
}

// state is a running container's started and ready flags.
func (m *probeManager) state(c *container, spec *corev1.Container) (started, ready bool) {
	started = true
	if spec.StartupProbe != nil {
		r, _ := m.get(c, startup)
		started = r == resultSuccess
	}
	if !started {
		return false, false
	}
	if spec.ReadinessProbe == nil {
		return true, true
	}
	r, _ := m.get(c, readiness)
	return true, r == resultSuccess
}

// unhealthy reports a container that failed its liveness or startup probe
// and must be restarted, with the event message.
func (m *probeManager) unhealthy(c *container) (string, bool) {
	for _, kind := range []probeKind{liveness, startup} {
		if r, _ := m.get(c, kind); r == resultFailure {
			return fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Spec.Name, strings.ToLower(string(kind))), true
		}
	}
	return "", false
}

// retain stops the workers of uid's container runs that are not running.
func (m *probeManager) retain(uid types.UID, running []string) {
	keep := map[string]bool{}
	for _, d := range running {
		keep[d] = true
	}
	m.stopWhere(func(k probeKey, w *probeWorker) bool { return w.uid == uid && !keep[k.dir] })
}

func (m *probeManager) removePod(uid types.UID) {
	m.stopWhere(func(_ probeKey, w *probeWorker) bool { return w.uid == uid })
}

// stopAll stops every worker and waits for them.
func (m *probeManager) stopAll() {
	m.stopWhere(func(probeKey, *probeWorker) bool { return true })
	m.wg.Wait()
}

func (m *probeManager) stopWhere(match func(probeKey, *probeWorker) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if match(k, w) {
			w.cancel()
			delete(m.workers, k)
		}
	}
}

// run probes until ctx ends, the startup probe succeeds, or the liveness
// or startup probe fails for good.
func (m *probeManager) run(ctx context.Context, w *probeWorker, key probeKey, pod *corev1.Pod, spec *corev1.Container, c *container, p *corev1.Probe, podIP string) {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	failureThreshold, successThreshold := int(max(p.FailureThreshold, 1)), int(max(p.SuccessThreshold, 1))
	first := time.Until(c.State.StartedAt.Add(time.Duration(p.InitialDelaySeconds) * time.Second))
	timer := time.NewTimer(max(first, 0))
	defer timer.Stop()
	successes, failures := 0, 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(period)
		if key.kind != startup && spec.StartupProbe != nil {
			if r, _ := m.get(c, startup); r != resultSuccess {
				continue
			}
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		out, err := m.agent.runAction(pctx, c, podIP, spec, action{exec: p.Exec, http: p.HTTPGet, tcp: p.TCPSocket, grpc: p.GRPC})
		cancel()
		if ctx.Err() != nil {
			return
		}
		result := resultSuccess
		if err != nil {
			result, out = resultFailure, err.Error()
			successes, failures = 0, failures+1
			m.agent.event(pod, spec.Name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", key.kind, out))
		} else {
			successes, failures = successes+1, 0
		}
		w.mu.Lock()
		prev := w.result
		switch {
		case result == resultSuccess && (successes >= successThreshold || key.kind != readiness):
			w.result = resultSuccess
		case result == resultFailure && failures >= failureThreshold:
			w.result, w.output = resultFailure, out
		}
		now := w.result
		w.mu.Unlock()
		if now != prev {
			m.agent.pokePod(pod.UID)
		}
		if (key.kind == startup && now == resultSuccess) || (key.kind != readiness && now == resultFailure) {
			return
		}
	}
}

// pokePod asks for a sync of the pod, if it has a worker.
func (a *Agent) pokePod(uid types.UID) {
	a.mu.Lock()
	w := a.workers[uid]
	a.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

// action is a probe's or a lifecycle hook's handler.
type action struct {
	exec  *corev1.ExecAction
	http  *corev1.HTTPGetAction
	tcp   *corev1.TCPSocketAction
	grpc  *corev1.GRPCAction
	sleep *corev1.SleepAction
}

// runAction runs a handler against the container and returns its output;
// an error is a failure.
func (a *Agent) runAction(ctx context.Context, c *container, podIP string, spec *corev1.Container, act action) (string, error) {
	switch {
	case act.exec != nil:
		return a.execIn(ctx, c, act.exec.Command)
	case act.http != nil:
		return a.httpGet(ctx, podIP, spec, act.http)
	case act.tcp != nil:
		host := act.tcp.Host
		if host == "" {
			host = podIP
		}
		port, err := resolvePort(act.tcp.Port, spec)
		if err != nil {
			return "", err
		}
		conn, err := a.net.Dialer().DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return "", err
		}
		conn.Close()
		return "", nil
	case act.grpc != nil:
		return a.grpcCheck(ctx, podIP, act.grpc)
	case act.sleep != nil:
		select {
		case <-time.After(time.Duration(act.sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return "", nil
	}
	return "", errors.New("no handler")
}

// execIn runs argv inside the container's namespaces with its env.
func (a *Agent) execIn(ctx context.Context, c *container, argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("no command")
	}
	if !c.Running() {
		return "", errors.New("container is not running")
	}
	cmd, done, err := a.enterCommand(ctx, c, argv, false)
	if err != nil {
		return "", err
	}
	defer done()
	// A child left holding the output does not hold the probe.
	cmd.WaitDelay = outputGrace
	out, err := cmd.CombinedOutput()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // it exited 0; the child is cut off
	}
	if ctx.Err() == context.DeadlineExceeded {
		return string(out), fmt.Errorf("command %q timed out", strings.Join(argv, " "))
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if len(out) > 0 {
				return string(out), errors.New(strings.TrimRight(string(out), "\n"))
			}
			return "", fmt.Errorf("command %q exited with %d", strings.Join(argv, " "), ee.ExitCode())
		}
		return string(out), err
	}
	return string(out), nil
}

// httpGet probes as the kubelet does: 2xx and 3xx succeed.
func (a *Agent) httpGet(ctx context.Context, podIP string, spec *corev1.Container, g *corev1.HTTPGetAction) (string, error) {
	host := g.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(g.Port, spec)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	u, err = u.Parse(path)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", probeUserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
		}
		req.Header.Set(h.Name, h.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{
			DialContext:       a.net.Dialer().DialContext,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // as the kubelet's probes
			DisableKeepAlives: true,
		},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 10 || r.URL.Hostname() != u.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return string(body), fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return string(body), nil
}

// grpcCheck calls the gRPC health service.
func (a *Agent) grpcCheck(ctx context.Context, podIP string, g *corev1.GRPCAction) (string, error) {
	addr := net.JoinHostPort(podIP, strconv.Itoa(int(g.Port)))
	dialer := a.net.Dialer()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(probeUserAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return "", fmt.Errorf("failed to connect service %q: %w", addr, err)
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return "", fmt.Errorf("health rpc probe failed: %w", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return "", fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus().String())
	}
	return "", nil
}

// resolvePort turns a port number or a container port's name into a
// number.
func resolvePort(p intstr.IntOrString, spec *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port: %v in %v", p.StrVal, spec.Name)
}

// runHandler runs a lifecycle hook.
func (a *Agent) runHandler(ctx context.Context, pod *corev1.Pod, c *container, h *corev1.LifecycleHandler) error {
	spec := specContainer(pod, c.Spec.Name)
	if spec == nil {
		return nil
	}
	rec, _ := a.loadPodRecord(string(pod.UID))
	_, err := a.runAction(ctx, c, rec.IP, spec, action{exec: h.Exec, http: h.HTTPGet, tcp: h.TCPSocket, sleep: h.Sleep})
	return err
}
