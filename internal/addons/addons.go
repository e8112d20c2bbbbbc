// Package addons is what `svcnet up` installs into a cluster, as kubeadm
// installs its add-ons after the control plane is up: cluster DNS as
// kubeadm's CoreDNS manifests lay it out (ServiceAccount coredns, its
// ClusterRole and ClusterRoleBinding system:coredns, ConfigMap coredns with the Corefile, Deployment coredns with pods
// labelled k8s-app=kube-dns, Service kube-dns on the cluster DNS address),
// played by svcnet's built-in coredns image. Scheduling, endpoints and
// node failures then work for DNS as for any workload. The load balancer
// add-on is MetalLB's namespace, metallb-system, and the pool of
// --lb-pool (or of the nodes' network) with its L2Advertisement.
//
// The objects are server-side applied on every start with one field
// manager and force, as k3s re-applies its packaged manifests: a field up
// sets is up's (a --dns-upstream given on the next start takes effect);
// fields it does not set stay as users left them.
package addons

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Config says how the add-ons are laid out.
type Config struct {
	// ClusterDNS is the kube-dns Service's cluster IP, Domain the
	// cluster domain.
	ClusterDNS netip.Addr
	Domain     string
	// Upstreams are the resolvers names outside the cluster are forwarded
	// to; empty forwards to /etc/resolv.conf, the node's resolvers that
	// dnsPolicy Default gives the coredns pods.
	Upstreams []string
	// Replicas is the number of coredns pods (kubeadm's 2).
	Replicas int32
}

// FieldManager owns the fields the add-ons set.
const FieldManager = "svcnet-up"

// Names of the DNS add-on's objects.
const (
	DNSService    = "kube-dns"
	DNSDeployment = "coredns"
	// legacyKubeconfigSecret held the coredns pods' kubeconfig before
	// their service account tokens did.
	legacyKubeconfigSecret = "coredns-kubeconfig"
	// DNSImage is kubeadm's CoreDNS image, which the node plays with
	// svcnet's own DNS.
	DNSImage = "registry.k8s.io/coredns/coredns:v1.12.1"
	// legacyManagedBy labels the kube-dns EndpointSlices node agents of
	// earlier svcnet versions published for their own DNS servers.
	legacyManagedBy = "node-dns.svcnet.io"
)

// Apply creates or updates the add-ons.
func Apply(ctx context.Context, client kubernetes.Interface, c Config) error {
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	ns := metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": "kube-dns"}
	for _, step := range []func() error{
		func() error { return apply(ctx, client.CoreV1().ServiceAccounts(ns), serviceAccount()) },
		func() error { return apply(ctx, client.RbacV1().ClusterRoles(), clusterRole()) },
		func() error { return apply(ctx, client.RbacV1().ClusterRoleBindings(), clusterRoleBinding()) },
		func() error { return apply(ctx, client.CoreV1().ConfigMaps(ns), configMap(c)) },
		func() error { return apply(ctx, client.CoreV1().Services(ns), service(c, labels)) },
		func() error { return apply(ctx, client.AppsV1().Deployments(ns), deployment(c, labels)) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	err := client.CoreV1().Secrets(ns).Delete(ctx, legacyKubeconfigSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the coredns pods' old kubeconfig: %w", err)
	}
	err = client.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + legacyManagedBy})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the node agents' old kube-dns slices: %w", err)
	}
	return nil
}

// object is an add-on object: its metadata and its kind.
type object interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// patcher is any typed client's Patch.
type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// apply server-side applies obj as the add-ons' field manager.
func apply[T any](ctx context.Context, p patcher[T], obj object) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", kind, obj.GetName(), err)
	}
	_, err = p.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

func meta(kind, apiVersion, name string, labels map[string]string) (metav1.TypeMeta, metav1.ObjectMeta) {
	return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion},
		metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels}
}

func serviceAccount() *corev1.ServiceAccount {
	tm, om := meta("ServiceAccount", "v1", DNSDeployment, nil)
	return &corev1.ServiceAccount{TypeMeta: tm, ObjectMeta: om}
}

// dnsRole names kubeadm's ClusterRole and ClusterRoleBinding of the DNS
// pods' service account.
const dnsRole = "system:coredns"

// clusterRole lets the DNS pods watch what they answer from, as kubeadm's.
func clusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{Kind: "ClusterRole", APIVersion: "rbac.authorization.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: dnsRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
}

func clusterRoleBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{Kind: "ClusterRoleBinding", APIVersion: "rbac.authorization.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: dnsRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: DNSDeployment, Namespace: metav1.NamespaceSystem}},
	}
}

// Corefile is kubeadm's, with the forward plugin's upstreams.
func Corefile(c Config) string {
	upstreams := "/etc/resolv.conf"
	if len(c.Upstreams) > 0 {
		upstreams = strings.Join(c.Upstreams, " ")
	}
	return fmt.Sprintf(`.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes %s in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . %s {
       max_concurrent 1000
    }
    cache 30 {
       disable success %[1]s
       disable denial %[1]s
    }
    loop
    reload
    loadbalance
}
`, c.Domain, upstreams)
}

func configMap(c Config) *corev1.ConfigMap {
	tm, om := meta("ConfigMap", "v1", DNSDeployment, nil)
	return &corev1.ConfigMap{TypeMeta: tm, ObjectMeta: om, Data: map[string]string{"Corefile": Corefile(c)}}
}

func service(c Config, selector map[string]string) *corev1.Service {
	tm, om := meta("Service", "v1", DNSService, map[string]string{
		"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"})
	om.Annotations = map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}
	return &corev1.Service{TypeMeta: tm, ObjectMeta: om, Spec: corev1.ServiceSpec{
		ClusterIP: c.ClusterDNS.String(),
		Selector:  selector,
		Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
		},
	}}
}

// deployment is kubeadm's coredns Deployment, but for the readiness
// probe's period: kubeadm's default 10 s would keep DNS out of kube-dns
// for up to 10 s after a pod starts (its first probe comes before the
// server has read the API), where svcnet aims to be up in a second.
func deployment(c Config, labels map[string]string) *appsv1.Deployment {
	tm, om := meta("Deployment", "apps/v1", DNSDeployment, map[string]string{"k8s-app": "kube-dns"})
	httpProbe := func(path string, port int32) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}
	}
	return &appsv1.Deployment{TypeMeta: tm, ObjectMeta: om, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(c.Replicas),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: DNSDeployment,
				PriorityClassName:  "system-cluster-critical",
				DNSPolicy:          corev1.DNSDefault,
				NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
				Tolerations: []corev1.Toleration{
					{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
					{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
				},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
						PodAffinityTerm: corev1.PodAffinityTerm{
							LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
								{Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-dns"}}}},
							TopologyKey: corev1.LabelHostname}}}}},
				Containers: []corev1.Container{{
					Name:  "coredns",
					Image: DNSImage,
					Args:  []string{"-conf", "/etc/coredns/Corefile"},
					Ports: []corev1.ContainerPort{
						{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
						{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
						{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
						{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
					},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true},
					},
					LivenessProbe: &corev1.Probe{ProbeHandler: httpProbe("/health", 8080),
						InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5},
					ReadinessProbe: &corev1.Probe{ProbeHandler: httpProbe("/ready", 8181), PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false),
						Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
						ReadOnlyRootFilesystem:   ptr.To(true),
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: DNSDeployment},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}}}},
				},
			},
		},
	}}
}
