package pod

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
)

// ServiceAccounts finds a pod's service account.
type ServiceAccounts interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
}

// Where upstream's ServiceAccount admission mounts the token volume.
const (
	tokenVolumePrefix = "kube-api-access-"
	tokenMountPath    = "/var/run/secrets/kubernetes.io/serviceaccount"
	rootCAConfigMap   = "kube-root-ca.crt"
)

// Admit is upstream's ServiceAccount admission plugin: a pod (not a
// mirror pod) runs as "default" unless it names another service account,
// which must exist; unless the pod or its service account turn
// automountServiceAccountToken off, every container mounts the projected
// kube-api-access-<5> volume (token, ca.crt, namespace) read-only at
// /var/run/secrets/kubernetes.io/serviceaccount; the service account's
// imagePullSecrets are the pod's when it has none.
func (s strategy) Admit(ctx context.Context, obj runtime.Object) error {
	pod := obj.(*corev1.Pod)
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccount
		pod.Spec.DeprecatedServiceAccount = defaultServiceAccount
	}
	if s.sas == nil {
		return nil
	}
	sa, err := s.sas.ServiceAccount(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		name := pod.Name
		if name == "" {
			name = pod.GenerateName
		}
		return apierrors.NewForbidden(corev1.Resource("pods"), name,
			fmt.Errorf("error looking up service account %s/%s: %w", pod.Namespace, pod.Spec.ServiceAccountName, err))
	}
	automount := true
	switch {
	case pod.Spec.AutomountServiceAccountToken != nil:
		automount = *pod.Spec.AutomountServiceAccountToken
	case sa.AutomountServiceAccountToken != nil:
		automount = *sa.AutomountServiceAccountToken
	}
	if automount {
		mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		for _, ref := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: ref.Name})
		}
	}
	return nil
}

// mountToken mounts the token volume in every container that has nothing
// at its path, adding the volume when one does.
func mountToken(pod *corev1.Pod) {
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, tokenVolumePrefix) {
			name = v.Name
			break
		}
	}
	has := name != ""
	if !has {
		name = tokenVolumePrefix + utilrand.String(5)
	}
	needed := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			mounted := false
			for _, m := range c.VolumeMounts {
				mounted = mounted || m.MountPath == tokenMountPath
			}
			if !mounted {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: tokenMountPath})
				needed = true
			}
		}
	}
	if !has && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// TokenVolumeSource is the kube-api-access volume's projection, as
// upstream's: a token of the pod's service account (3607 s, which the
// API server extends), the cluster CA and the pod's namespace, mode 0644.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](serviceaccount.WarnOnlyExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}
