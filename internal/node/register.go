package node

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/images"
	nodereg "github.com/svcnet/svcnet/internal/registry/node"
)

// Heartbeats, as the kubelet's defaults: the Lease is renewed every 10 s
// and lasts 40 s; the Node's status is written when it changes, and at
// least every 5 minutes.
const (
	leaseDuration        = 40
	leaseRenewInterval   = 10 * time.Second
	statusReportInterval = 5 * time.Minute
)

// registration keeps the Node object and its Lease.
type registration struct {
	agent *Agent
	// endpoint is host:port of the node's HTTPS server, port its port.
	endpoint string
	port     int32
	ready    bool
	reported time.Time
	disk     *diskPressure
}

// register creates or adopts the Node and waits until node IPAM has given
// it a pod CIDR, which it returns.
func (r *registration) register(ctx context.Context) (string, error) {
	a := r.agent
	nodes := a.client.CoreV1().Nodes()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Labels: r.labels()},
		Status:     r.status(nil),
	}
	_, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = r.updateNode(ctx, func(n *corev1.Node) {
			for k, v := range r.labels() {
				if n.Labels == nil {
					n.Labels = map[string]string{}
				}
				n.Labels[k] = v
			}
		})
	}
	if err != nil {
		return "", fmt.Errorf("register node %s: %w", a.cfg.NodeName, err)
	}
	r.conditionEvents(changedConditions(nil, node.Status))
	slog.Info("node registered; waiting for a pod CIDR from node IPAM", "node", a.cfg.NodeName)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		n, err := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err == nil && n.Spec.PodCIDR != "" {
			return n.Spec.PodCIDR, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// markReady records where the node serves and reports it Ready.
func (r *registration) markReady(ctx context.Context, srv *server) error {
	r.endpoint, r.port, r.ready = srv.endpoint(), srv.port(), true
	err := r.updateNode(ctx, func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[nodereg.KubeletEndpointAnnotation] = r.endpoint
	})
	if err != nil {
		return fmt.Errorf("annotate node: %w", err)
	}
	return r.reportStatus(ctx, true)
}

// updateNode applies change to the Node's metadata or spec, retrying on
// conflicts (the node lifecycle controller writes taints too).
func (r *registration) updateNode(ctx context.Context, change func(*corev1.Node)) error {
	nodes := r.agent.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, r.agent.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// reportStatus writes the Node's status if it changed or force is set,
// retrying on conflicts with other writers of the Node.
func (r *registration) reportStatus(ctx context.Context, force bool) error {
	nodes := r.agent.client.CoreV1().Nodes()
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, r.agent.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		st := r.status(&n.Status)
		if !force && time.Since(r.reported) < statusReportInterval && sameConditions(n.Status, st) &&
			apiequality.Semantic.DeepEqual(n.Status.Addresses, st.Addresses) && apiequality.Semantic.DeepEqual(n.Status.Images, st.Images) {
			return nil
		}
		events := changedConditions(&n.Status, st)
		n.Status = st
		_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if wrote = err == nil; wrote {
			r.conditionEvents(events)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("update node status: %w", err)
	}
	if wrote {
		r.reported = time.Now()
	}
	return nil
}

// conditionEvents records the kubelet's Node events of changed conditions.
func (r *registration) conditionEvents(events []string) {
	name := r.agent.cfg.NodeName
	for _, ev := range events {
		r.agent.recorder.Eventf(r.agent.nodeRef(), corev1.EventTypeNormal, ev, "Node %s status is now: %s", name, ev)
	}
}

// nodeRef is the Node as the kubelet's events about it name it.
func (a *Agent) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
}

// nodeCondition is st's condition of type t, nil when st is nil or
// has none.
func nodeCondition(st *corev1.NodeStatus, t corev1.NodeConditionType) *corev1.NodeCondition {
	if st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func sameConditions(a, b corev1.NodeStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// heartbeat renews the Lease and reports the status until ctx ends.
func (r *registration) heartbeat(ctx context.Context) {
	t := time.NewTicker(leaseRenewInterval)
	defer t.Stop()
	for {
		if err := r.renewLease(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("renew node lease", "err", err)
		}
		if err := r.reportStatus(ctx, false); err != nil && ctx.Err() == nil {
			slog.Warn("report node status", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *registration) renewLease(ctx context.Context) error {
	a := r.agent
	leases := a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.NodeName, Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a.cfg.NodeName), LeaseDurationSeconds: ptr.To[int32](leaseDuration), RenewTime: &now},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return fmt.Errorf("get lease: %w", err)
	}
	l.Spec.HolderIdentity = ptr.To(a.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDuration)
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (r *registration) labels() map[string]string {
	l := map[string]string{
		"kubernetes.io/hostname":  r.agent.cfg.NodeName,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	return l
}

// status is the Node's status now; old keeps condition transition times.
func (r *registration) status(old *corev1.NodeStatus) corev1.NodeStatus {
	a := r.agent
	capacity := r.capacity()
	alloc := capacity.DeepCopy()
	if m, ok := alloc[corev1.ResourceMemory]; ok {
		m.Sub(resource.MustParse("100Mi")) // the kubelet's default hard eviction threshold
		alloc[corev1.ResourceMemory] = m
	}
	if e, ok := alloc[corev1.ResourceEphemeralStorage]; ok {
		alloc[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(e.Value()/10*9, resource.BinarySI)
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		if o := nodeCondition(old, t); o != nil && o.Status == s {
			c.LastTransitionTime = o.LastTransitionTime
		}
		return c
	}
	disk := cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	if pressure, signal := r.disk.observe(now.Time); pressure {
		disk = cond(corev1.NodeDiskPressure, corev1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure")
		if o := nodeCondition(old, corev1.NodeDiskPressure); o == nil || o.Status != corev1.ConditionTrue {
			slog.Warn("node under disk pressure: new pods are not scheduled here", "node", a.cfg.NodeName, "path", r.disk.path, "signal", signal)
		}
	}
	ready := cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady",
		"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:the node has no pod CIDR yet")
	if r.ready {
		ready = cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	}
	st := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: alloc,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			disk,
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			ready,
		},
		NodeInfo: r.nodeInfo(),
	}
	if old != nil {
		// The attach/detach controller's to write.
		st.VolumesAttached = old.VolumesAttached
	}
	if a.nodeIP != nil {
		st.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: a.nodeIP.String()}, {Type: corev1.NodeHostName, Address: a.cfg.NodeName}}
	}
	if r.port != 0 {
		st.DaemonEndpoints.KubeletEndpoint.Port = r.port
	}
	st.Images = r.images()
	return st
}

// maxNodeImages is the kubelet's --node-status-max-images default.
const maxNodeImages = 50

// images are the pulled images, largest first, as the kubelet lists them:
// repo digests then tags.
func (r *registration) images() []corev1.ContainerImage {
	if r.agent.images == nil {
		return nil
	}
	imgs, err := r.agent.images.List()
	if err != nil {
		slog.Warn("node status: list images", "err", err)
		return nil
	}
	slices.SortStableFunc(imgs, func(x, y *images.Image) int { return cmp.Compare(y.Size, x.Size) })
	var out []corev1.ContainerImage
	for _, img := range imgs[:min(len(imgs), maxNodeImages)] {
		out = append(out, corev1.ContainerImage{Names: slices.Concat(img.RepoDigests, img.RepoTags), SizeBytes: img.Size})
	}
	return out
}

// capacity is the machine's CPUs, memory and the data dir's disk.
func (r *registration) capacity() corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:                   *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods:                  *resource.NewQuantity(int64(r.agent.cfg.MaxPods), resource.DecimalSI),
		corev1.ResourceName("hugepages-1Gi"): resource.MustParse("0"),
		corev1.ResourceName("hugepages-2Mi"): resource.MustParse("0"),
	}
	if kb := memTotalKiB(); kb > 0 {
		c[corev1.ResourceMemory] = *resource.NewQuantity(kb*1024, resource.BinarySI)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(r.agent.cfg.DataDir, &fs); err == nil {
		c[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI)
	}
	return c
}

func memTotalKiB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); err == nil {
			return kb
		}
	}
	return 0
}

func (r *registration) nodeInfo() corev1.NodeSystemInfo {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	osImage := "Linux"
	for line := range strings.SplitSeq(read("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			osImage = strings.Trim(v, `"`)
		}
	}
	machineID := read("/etc/machine-id")
	uuid := read("/sys/class/dmi/id/product_uuid")
	if uuid == "" {
		uuid = machineID
	}
	return corev1.NodeSystemInfo{
		MachineID:               machineID,
		SystemUUID:              uuid,
		BootID:                  read("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           unix.ByteSliceToString(uts.Release[:]),
		OSImage:                 osImage,
		ContainerRuntimeVersion: "svcnet://" + r.agent.cfg.Version,
		KubeletVersion:          r.agent.cfg.Version,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
	}
}
