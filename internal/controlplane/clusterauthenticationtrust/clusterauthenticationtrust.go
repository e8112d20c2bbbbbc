// Package clusterauthenticationtrust writes, at API server start, the
// ConfigMap kube-system/extension-apiserver-authentication, as
// kube-apiserver's cluster authentication trust controller: the CA that
// signs client certificates (client-ca-file) and the request header
// authentication an extension API server trusts from the aggregator (the
// front-proxy CA, the names its client certificate may carry and the
// X-Remote-* headers). Extension servers (upstream's sample-apiserver,
// metrics-server) read it through the extension-apiserver-authentication-
// reader Role.
//
// Upstream merges the bundles of every API server into the ConfigMap and
// rewrites it each minute; svcnet's API servers sharing an etcd share
// their CAs (the CA directory), so each writes the same content, once.
package clusterauthenticationtrust

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Upstream's ConfigMap and its request header defaults (kubeadm's flags).
const (
	Namespace = metav1.NamespaceSystem
	Name      = "extension-apiserver-authentication"
	// ProxyClientName is the front-proxy client certificate's common name,
	// the one allowed name.
	ProxyClientName    = "front-proxy-client"
	UsernameHeader     = "X-Remote-User"
	UIDHeader          = "X-Remote-Uid"
	GroupHeader        = "X-Remote-Group"
	ExtraHeadersPrefix = "X-Remote-Extra-"
)

// Info is what the ConfigMap says: PEM bundles.
type Info struct {
	ClientCA             []byte
	RequestHeaderCA      []byte
	RequestHeaderAllowed []string
}

// Data is the ConfigMap's data for info, in upstream's keys (lists as
// JSON arrays).
func Data(info Info) (map[string]string, error) {
	data := map[string]string{
		"client-ca-file":               string(info.ClientCA),
		"requestheader-client-ca-file": string(info.RequestHeaderCA),
	}
	for key, list := range map[string][]string{
		"requestheader-username-headers":     {UsernameHeader},
		"requestheader-uid-headers":          {UIDHeader},
		"requestheader-group-headers":        {GroupHeader},
		"requestheader-extra-headers-prefix": {ExtraHeadersPrefix},
		"requestheader-allowed-names":        info.RequestHeaderAllowed,
	} {
		b, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		data[key] = string(b)
	}
	return data, nil
}

// Ensure creates the ConfigMap, or brings its data back to info's.
func Ensure(ctx context.Context, client kubernetes.Interface, info Info) error {
	data, err := Data(info)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(Namespace)
	cm, err := cms.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace}, Data: data}, metav1.CreateOptions{})
	} else if err == nil && !maps.Equal(cm.Data, data) {
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", Namespace, Name, err)
	}
	return nil
}
