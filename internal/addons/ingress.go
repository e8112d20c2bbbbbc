package addons

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/svcnet/svcnet/internal/ingress/controller"
)

// Names of the Ingress add-on's objects: svcnet's Ingress controller laid
// out as ingress-nginx's manifests lay out theirs (a namespace of its own,
// a controller Deployment fronted by a LoadBalancer Service, and the
// IngressClass it serves).
const (
	IngressNamespace = "svcnet-ingress"
	// IngressController names the ServiceAccount, ClusterRole and binding,
	// Deployment and Service.
	IngressController = "svcnet-ingress-controller"
	IngressClass      = "svcnet"
	// IngressImage is played by the node with svcnet's ingress program.
	IngressImage = "svcnet.io/ingress-controller:v1.0.0"
	// ingressMetricsPort serves /metrics and /healthz, as ingress-nginx's.
	ingressMetricsPort = 10254
)

// ApplyIngress creates or updates the Ingress add-on. The IngressClass is
// marked the default (ingressclass.kubernetes.io/is-default-class) unless
// another IngressClass already is.
func ApplyIngress(ctx context.Context, client kubernetes.Interface) error {
	classes, err := client.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ingress classes: %w", err)
	}
	otherDefault := false
	for _, c := range classes.Items {
		if c.Name != IngressClass && c.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			otherDefault = true
		}
	}
	labels := map[string]string{"app.kubernetes.io/name": "svcnet-ingress", "app.kubernetes.io/component": "controller"}
	ns := IngressNamespace
	for _, step := range []func() error{
		func() error {
			return apply(ctx, client.CoreV1().Namespaces(), &corev1.Namespace{
				TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: ns}})
		},
		func() error { return apply(ctx, client.CoreV1().ServiceAccounts(ns), ingressServiceAccount(labels)) },
		func() error { return apply(ctx, client.RbacV1().ClusterRoles(), ingressClusterRole(labels)) },
		func() error {
			return apply(ctx, client.RbacV1().ClusterRoleBindings(), ingressClusterRoleBinding(labels))
		},
		func() error {
			return apply(ctx, client.NetworkingV1().IngressClasses(), ingressClass(labels, !otherDefault))
		},
		func() error { return apply(ctx, client.CoreV1().Services(ns), ingressService(labels)) },
		func() error { return apply(ctx, client.AppsV1().Deployments(ns), ingressDeployment(labels)) },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// ingressMeta is an object of the add-on's namespace.
func ingressMeta(kind, apiVersion, name string, labels map[string]string) (metav1.TypeMeta, metav1.ObjectMeta) {
	tm, om := meta(kind, apiVersion, name, labels)
	om.Namespace = IngressNamespace
	return tm, om
}

func ingressServiceAccount(labels map[string]string) *corev1.ServiceAccount {
	tm, om := ingressMeta("ServiceAccount", "v1", IngressController, labels)
	return &corev1.ServiceAccount{TypeMeta: tm, ObjectMeta: om}
}

// ingressClusterRole is what the controller reads and writes: the
// objects a routing table is made of, the nodes and pods its status
// addresses come from, Ingress status and events.
func ingressClusterRole(labels map[string]string) *rbacv1.ClusterRole {
	read := []string{"get", "list", "watch"}
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{Kind: "ClusterRole", APIVersion: "rbac.authorization.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: IngressController, Labels: labels},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets", "nodes", "pods"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			// The Gateway API (package ingress/gateway): its kinds, their
			// status, and the namespaces allowedRoutes selectors match.
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: read},
			{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"}, Verbs: read},
			{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"gatewayclasses/status", "gateways/status", "httproutes/status"}, Verbs: []string{"update"}},
		},
	}
}

func ingressClusterRoleBinding(labels map[string]string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{Kind: "ClusterRoleBinding", APIVersion: "rbac.authorization.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: IngressController, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: IngressController},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: IngressController, Namespace: IngressNamespace}},
	}
}

func ingressClass(labels map[string]string, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		TypeMeta:   metav1.TypeMeta{Kind: "IngressClass", APIVersion: "networking.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: IngressClass, Labels: labels},
		Spec:       networkingv1.IngressClassSpec{Controller: controller.ControllerName},
	}
	if isDefault {
		c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return c
}

// ingressService fronts the controller. externalTrafficPolicy Local keeps
// the client's address (for X-Forwarded-For), as ingress-nginx's
// manifests for bare metal and cloud load balancers set it.
func ingressService(labels map[string]string) *corev1.Service {
	tm, om := ingressMeta("Service", "v1", IngressController, labels)
	return &corev1.Service{TypeMeta: tm, ObjectMeta: om, Spec: corev1.ServiceSpec{
		Type:                  corev1.ServiceTypeLoadBalancer,
		ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		Selector:              labels,
		Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
			{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("https")},
		},
	}}
}

func ingressDeployment(labels map[string]string) *appsv1.Deployment {
	tm, om := ingressMeta("Deployment", "apps/v1", IngressController, labels)
	healthz := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(ingressMetricsPort), Scheme: corev1.URISchemeHTTP}}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &appsv1.Deployment{TypeMeta: tm, ObjectMeta: om, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: IngressController,
				NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
				// As ingress-nginx's: time for open requests to finish.
				TerminationGracePeriodSeconds: ptr.To[int64](300),
				Containers: []corev1.Container{{
					Name:  "controller",
					Image: IngressImage,
					Args: []string{
						"--ingress-class=" + IngressClass,
						"--publish-service=" + IngressNamespace + "/" + IngressController,
						fmt.Sprintf("--metrics-bind-address=:%d", ingressMetricsPort),
					},
					Env: []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace")},
					Ports: []corev1.ContainerPort{
						{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
						{Name: "https", ContainerPort: 443, Protocol: corev1.ProtocolTCP},
						{Name: "metrics", ContainerPort: ingressMetricsPort, Protocol: corev1.ProtocolTCP},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: healthz, PeriodSeconds: 1, FailureThreshold: 3},
					LivenessProbe:  &corev1.Probe{ProbeHandler: healthz, InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 5},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false),
						Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
					},
				}},
			},
		},
	}}
}
