package cluster

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/svcnet/svcnet/internal/logs"
	"github.com/svcnet/svcnet/internal/node"
	"github.com/svcnet/svcnet/internal/proxy"
)

// The components in kube-system. kubeadm runs etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler as static pods of the
// control-plane node, and kube-proxy on every node; svcnet runs them in
// the node's process, and each node agent shows its components as the
// kubelet shows static pods, as mirror pods (node.StaticPod), Ready while
// the component's own health check passes, their log the component's own
// (internal/logs). A container's command is the svcnet subcommand that
// runs the component alone, with the settings it runs with here.

// criticalPriorityClass is the class of kubeadm's static pods and of
// kube-proxy.
const criticalPriorityClass = "system-node-critical"

// EtcdImage is the etcd image of the etcd mirror pod: registry.k8s.io's
// tag for the etcd release svcnet embeds.
var EtcdImage = "registry.k8s.io/etcd:" + etcdversion.Version + "-0"

var klogOnce sync.Once

// installLogs makes the process's default logger a logs.Router (once),
// klog's records going through it too.
func installLogs() *logs.Router {
	r := logs.Install()
	klogOnce.Do(func() { klog.SetSlogLogger(slog.Default()) })
	return r
}

// controlPlane is what up shows of its control plane: the components'
// logs, routed while it runs, and what their mirror pods report.
type controlPlane struct {
	api *APIServerOptions
	cm  *ControllerManagerOptions
	// dir holds the components' logs.
	dir     string
	files   map[string]*logs.File
	unroute []func()

	apiServer         atomic.Pointer[APIServer]
	controllerManager atomic.Pointer[ControllerManager]
}

// startControlPlaneLogs routes the control plane's records to logs of
// their own under the data dir, and the embedded etcd's own log to one.
func startControlPlaneLogs(o *UpOptions) (*controlPlane, error) {
	r := installLogs()
	cp := &controlPlane{api: &o.APIServer, cm: &o.ControllerManager, dir: filepath.Join(o.APIServer.DataDir, "logs"), files: map[string]*logs.File{}}
	components := []string{logs.KubeAPIServer, logs.KubeControllerManager, logs.KubeScheduler}
	if len(o.APIServer.EtcdServers) == 0 {
		components = append(components, logs.Etcd)
	}
	for _, c := range components {
		f, err := logs.Create(filepath.Join(cp.dir, c+".log"), logs.MaxFileSize)
		if err != nil {
			cp.close()
			return nil, fmt.Errorf("%s log: %w", c, err)
		}
		cp.files[c] = f
		if c == logs.Etcd {
			o.APIServer.EtcdLog = f // etcd logs through zap, not slog
			continue
		}
		cp.unroute = append(cp.unroute, r.Route(c, "", f))
	}
	return cp, nil
}

// close stops the routing and closes the logs.
func (cp *controlPlane) close() {
	for _, u := range cp.unroute {
		u()
	}
	for _, f := range cp.files {
		_ = f.Close()
	}
}

// staticPods are the control plane's mirror pods, for the control
// plane's node.
func (cp *controlPlane) staticPods() []node.StaticPod {
	o := cp.api
	apiCmd := []string{"svcnet", "apiserver", "--data-dir=" + o.DataDir}
	var pods []node.StaticPod
	if len(o.EtcdServers) == 0 {
		etcdCmd := append(append([]string{}, apiCmd...), "--etcd-client-url="+o.EtcdClientURL, "--etcd-peer-url="+o.EtcdPeerURL)
		pods = append(pods, node.StaticPod{
			Pod: controlPlanePod("etcd", EtcdImage, etcdCmd),
			Log: cp.files[logs.Etcd].Path(),
			Started: func() time.Time {
				if a := cp.apiServer.Load(); a != nil && a.Etcd() != nil {
					return a.Etcd().Started
				}
				return time.Time{}
			},
			Healthy: func(ctx context.Context) error { return cp.apiServer.Load().EtcdHealthy(ctx) },
		})
		apiCmd = append(apiCmd, "--etcd-client-url="+o.EtcdClientURL)
	} else {
		apiCmd = append(apiCmd, "--etcd-servers="+strings.Join(o.EtcdServers, ","))
		for _, f := range []struct{ flag, path string }{
			{"--etcd-cafile", o.EtcdTLS.TrustedCAFile}, {"--etcd-certfile", o.EtcdTLS.CertFile}, {"--etcd-keyfile", o.EtcdTLS.KeyFile},
		} {
			if f.path != "" {
				apiCmd = append(apiCmd, f.flag+"="+f.path)
			}
		}
	}
	apiCmd = append(apiCmd, "--bind-address="+cmp.Or(o.BindAddress, "127.0.0.1:6443"))
	if o.AdvertiseAddress != "" {
		apiCmd = append(apiCmd, "--advertise-address="+o.AdvertiseAddress)
	}
	apiCmd = append(apiCmd, "--service-cluster-ip-range="+cmp.Or(o.ServiceClusterIPRange, DefaultServiceClusterIPRange),
		"--service-node-port-range="+cmp.Or(o.ServiceNodePortRange, DefaultServiceNodePortRange))
	pods = append(pods, node.StaticPod{
		Pod: controlPlanePod("kube-apiserver", "registry.k8s.io/kube-apiserver:"+KubernetesVersion, apiCmd),
		Log: cp.files[logs.KubeAPIServer].Path(),
		Started: func() time.Time {
			if a := cp.apiServer.Load(); a != nil {
				return a.Started
			}
			return time.Time{}
		},
		Healthy: func(ctx context.Context) error { return cp.apiServer.Load().Ready(ctx) },
	})

	// The scheduler runs in the controller manager, on its lease.
	cm := cp.cm
	cmCmd := []string{"svcnet", "controller-manager", "--kubeconfig=" + filepath.Join(o.DataDir, "kubeconfig"),
		"--controllers=" + strings.Join(cm.Controllers, ","), "--leader-elect=" + strconv.FormatBool(cm.LeaderElection.Enabled)}
	if cm.MetricsBindAddress != "" {
		cmCmd = append(cmCmd, "--metrics-bind-address="+cm.MetricsBindAddress)
	}
	cmStarted := func() time.Time {
		if c := cp.controllerManager.Load(); c != nil {
			return c.Started
		}
		return time.Time{}
	}
	cmHealthy := func(context.Context) error { return cp.controllerManager.Load().Healthy() }
	for _, c := range []string{logs.KubeControllerManager, logs.KubeScheduler} {
		pods = append(pods, node.StaticPod{
			Pod: controlPlanePod(c, "registry.k8s.io/"+c+":"+KubernetesVersion, cmCmd),
			Log: cp.files[c].Path(), Started: cmStarted, Healthy: cmHealthy,
		})
	}
	return pods
}

// controlPlanePod is a static pod as kubeadm writes them: the component's
// name, labels component and tier, on the host's network, critical.
func controlPlanePod(name, image string, command []string) *corev1.Pod {
	p := componentPod(name, image, command)
	p.Labels = map[string]string{"component": name, "tier": "control-plane"}
	return p
}

func componentPod(name, image string, command []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: criticalPriorityClass,
			Containers: []corev1.Container{{
				Name: name, Image: image, Command: command, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		},
	}
}

// proxyPod is the node's kube-proxy, which upstream's DaemonSet runs
// (labelled k8s-app=kube-proxy) and svcnet's node agent itself; its log
// is kube-proxy.log in the node's data dir, routed there while it runs.
type proxyPod struct {
	file    *logs.File
	unroute func()
	health  *proxy.Health
}

func startProxyLog(o NodeOptions, nodeName string, health *proxy.Health) (*proxyPod, error) {
	f, err := logs.Create(filepath.Join(o.DataDir, "logs", "kube-proxy.log"), logs.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy log: %w", err)
	}
	return &proxyPod{file: f, unroute: installLogs().Route(logs.KubeProxy, nodeName, f), health: health}, nil
}

func (p *proxyPod) close() {
	p.unroute()
	_ = p.file.Close()
}

func (p *proxyPod) staticPod(o NodeOptions, nodeName string) node.StaticPod {
	cmd := []string{"svcnet", "node", "--kubeconfig=" + o.Kubeconfig, "--data-dir=" + o.DataDir, "--node-name=" + nodeName, "--proxy-mode=" + o.ProxyMode}
	if o.NetNS != "" {
		cmd = append(cmd, "--netns="+o.NetNS)
	}
	pod := componentPod("kube-proxy", "registry.k8s.io/kube-proxy:"+KubernetesVersion, cmd)
	pod.Labels = map[string]string{"k8s-app": "kube-proxy"}
	return node.StaticPod{
		Pod: pod, Log: p.file.Path(), Started: p.health.Started,
		Healthy: func(context.Context) error { return p.health.Check(time.Now()) },
	}
}
