package cluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/svcnet/svcnet/internal/pki"
)

// WriteKubeconfig writes a kubeconfig for server with the given CA and
// client certificate, as the current context "svcnet".
func WriteKubeconfig(path, server string, caPEM []byte, client pki.Pair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["svcnet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["svcnet-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts["svcnet"] = &clientcmdapi.Context{Cluster: "svcnet", AuthInfo: "svcnet-admin", Namespace: "default"}
	cfg.CurrentContext = "svcnet"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
