package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/storage"
)

// Names and timings of upstream's kubernetes-service controller and lease
// endpoint reconciler.
const (
	kubernetesName = "kubernetes"
	httpsPortName  = "https"
	// EndpointInterval is how often each API server renews its lease and
	// reconciles the endpoints.
	EndpointInterval = 10 * time.Second
	// leaseTTL is how long an API server stays listed after its last
	// renewal (a crashed one drops out after at most this).
	leaseTTL = 15 // seconds
	// leasePrefix holds one key per live API server, named by its address,
	// as upstream's /registry/masterleases/.
	leasePrefix   = "/registry/masterleases/"
	endpointsKey  = "/registry/endpoints/" + metav1.NamespaceDefault + "/" + kubernetesName
	endpointSlice = "/registry/endpointslices/" + metav1.NamespaceDefault + "/" + kubernetesName
)

// KubernetesService keeps the `kubernetes` Service in the default
// namespace, and lists this API server in its Endpoints and EndpointSlice
// while it lives. Several API servers on one etcd each hold a lease (an
// etcd key with a TTL) under leasePrefix; the endpoints list the addresses
// of the live leases. All of them must serve on the same port.
//
// The Service is written through the API (Client, the loopback client), so
// its cluster IP is allocated like any other. The Endpoints and
// EndpointSlice are written straight to storage, as upstream's reconciler
// writes through its storage layer: an API server bound to loopback lists a
// loopback address, which validation refuses to users' endpoints.
type KubernetesService struct {
	Client    kubernetes.Interface
	Store     *storage.Store
	Etcd      *clientv3.Client
	ServiceIP netip.Addr // the first address of the primary service CIDR
	Address   netip.Addr // this API server's advertised address
	Port      int32      // this API server's port
}

// Start creates or corrects the Service and lists this API server in its
// endpoints.
func (k *KubernetesService) Start(ctx context.Context) error {
	if err := k.ensureService(ctx, true); err != nil {
		return err
	}
	return k.reconcileEndpoints(ctx, true)
}

// Run keeps the Service and the endpoints every EndpointInterval until ctx
// ends, then takes this API server out of the endpoints.
func (k *KubernetesService) Run(ctx context.Context) {
	t := time.NewTicker(EndpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := k.reconcileEndpoints(stop, false); err != nil {
				slog.Warn("remove this API server from the kubernetes endpoints", "err", err)
			}
			return
		case <-t.C:
			if err := k.ensureService(ctx, false); err != nil && ctx.Err() == nil {
				slog.Error("keep the kubernetes service", "err", err)
			}
			if err := k.reconcileEndpoints(ctx, true); err != nil && ctx.Err() == nil {
				slog.Error("keep the kubernetes endpoints", "err", err)
			}
		}
	}
}

func (k *KubernetesService) desiredService() *corev1.Service {
	ip := k.ServiceIP.String()
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceTypeClusterIP,
			ClusterIP:       ip,
			ClusterIPs:      []string{ip},
			IPFamilyPolicy:  ptr.To(corev1.IPFamilyPolicySingleStack),
			SessionAffinity: corev1.ServiceAffinityNone,
			Ports: []corev1.ServicePort{{Name: httpsPortName, Protocol: corev1.ProtocolTCP, Port: 443,
				TargetPort: intstr.FromInt32(k.Port)}},
		},
	}
}

// ensureService creates the Service when it is missing and, at start,
// corrects its ports and type, as upstream does.
func (k *KubernetesService) ensureService(ctx context.Context, atStart bool) error {
	services := k.Client.CoreV1().Services(metav1.NamespaceDefault)
	want := k.desiredService()
	cur, err := services.Get(ctx, kubernetesName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, want, metav1.CreateOptions{FieldManager: "kube-apiserver"})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create the kubernetes service: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the kubernetes service: %w", err)
	}
	if !atStart || (cur.Spec.Type == want.Spec.Type && portsMatch(cur.Spec.Ports, want.Spec.Ports)) {
		return nil
	}
	cur.Spec.Type, cur.Spec.Ports = want.Spec.Type, want.Spec.Ports
	if _, err := services.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kube-apiserver"}); err != nil {
		return fmt.Errorf("update the kubernetes service: %w", err)
	}
	return nil
}

func portsMatch(got, want []corev1.ServicePort) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Protocol != w.Protocol || g.Port != w.Port || g.TargetPort != w.TargetPort {
			return false
		}
	}
	return true
}

// reconcileEndpoints renews (or, when leaving, drops) this API server's
// lease and rewrites the endpoints when they differ from the live leases.
func (k *KubernetesService) reconcileEndpoints(ctx context.Context, include bool) error {
	key := leasePrefix + k.Address.String()
	if include {
		lease, err := k.Etcd.Grant(ctx, leaseTTL)
		if err != nil {
			return fmt.Errorf("grant API server lease: %w", err)
		}
		if _, err := k.Etcd.Put(ctx, key, k.Address.String(), clientv3.WithLease(lease.ID)); err != nil {
			return fmt.Errorf("renew API server lease: %w", err)
		}
	} else if _, err := k.Etcd.Delete(ctx, key); err != nil {
		return fmt.Errorf("drop API server lease: %w", err)
	}
	resp, err := k.Etcd.Get(ctx, leasePrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list API server leases: %w", err)
	}
	var live []netip.Addr
	for _, kv := range resp.Kvs {
		if a, err := netip.ParseAddr(strings.TrimPrefix(string(kv.Key), leasePrefix)); err == nil {
			live = append(live, a)
		}
	}
	slices.SortFunc(live, netip.Addr.Compare)
	if err := k.write(ctx, endpointsKey, k.endpoints(live)); err != nil {
		return err
	}
	return k.write(ctx, endpointSlice, k.slice(live))
}

func (k *KubernetesService) endpoints(live []netip.Addr) *corev1.Endpoints {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: kubernetesName, Namespace: metav1.NamespaceDefault,
		Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}}}
	if len(live) > 0 {
		subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: httpsPortName, Port: k.Port, Protocol: corev1.ProtocolTCP}}}
		for _, a := range live {
			subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: a.String()})
		}
		ep.Subsets = []corev1.EndpointSubset{subset}
	}
	return ep
}

func (k *KubernetesService) slice(live []netip.Addr) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(httpsPortName), Port: ptr.To(k.Port),
			Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if len(live) > 0 && !slices.ContainsFunc(live, netip.Addr.Is4) {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, a := range live {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// write stores want at key unless the stored object already has its
// content; a concurrent writer wins and the next round looks again.
func (k *KubernetesService) write(ctx context.Context, key string, want runtime.Object) error {
	wantMeta, _ := want.(metav1.Object)
	cur, err := k.Store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		wantMeta.SetUID(types.UID(uuid.NewString()))
		wantMeta.SetCreationTimestamp(metav1.Now().Rfc3339Copy())
		_, err = k.Store.Create(ctx, key, want, storage.Extra{})
		if errors.Is(err, storage.ErrExists) {
			return nil
		}
		return wrapWrite(key, err)
	}
	if err != nil {
		return wrapWrite(key, err)
	}
	curMeta, _ := cur.(metav1.Object)
	if sameContent(cur, want) && apiequality.Semantic.DeepEqual(curMeta.GetLabels(), wantMeta.GetLabels()) {
		return nil
	}
	next := cur.DeepCopyObject()
	setContent(next, want)
	nextMeta, _ := next.(metav1.Object)
	nextMeta.SetLabels(wantMeta.GetLabels())
	rev, _ := strconv.ParseInt(curMeta.GetResourceVersion(), 10, 64)
	_, err = k.Store.Update(ctx, key, next, rev, storage.Extra{})
	if errors.Is(err, storage.ErrConflict) {
		return nil
	}
	return wrapWrite(key, err)
}

func wrapWrite(key string, err error) error {
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

func sameContent(cur, want runtime.Object) bool {
	switch w := want.(type) {
	case *corev1.Endpoints:
		return apiequality.Semantic.DeepEqual(cur.(*corev1.Endpoints).Subsets, w.Subsets)
	case *discoveryv1.EndpointSlice:
		c := cur.(*discoveryv1.EndpointSlice)
		return c.AddressType == w.AddressType && apiequality.Semantic.DeepEqual(c.Endpoints, w.Endpoints) &&
			apiequality.Semantic.DeepEqual(c.Ports, w.Ports)
	}
	return false
}

func setContent(dst, src runtime.Object) {
	switch s := src.(type) {
	case *corev1.Endpoints:
		dst.(*corev1.Endpoints).Subsets = s.Subsets
	case *discoveryv1.EndpointSlice:
		d := dst.(*discoveryv1.EndpointSlice)
		d.AddressType, d.Endpoints, d.Ports = s.AddressType, s.Endpoints, s.Ports
	}
}
