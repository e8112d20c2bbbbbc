package cluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/svcnet/svcnet/internal/pki"
)

// Kubeconfig is a kubeconfig for server with the given CA and client
// certificate, as the current context "svcnet".
func Kubeconfig(server string, caPEM []byte, client pki.Pair) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["svcnet"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["svcnet-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: client.CertPEM, ClientKeyData: client.KeyPEM}
	cfg.Contexts["svcnet"] = &clientcmdapi.Context{Cluster: "svcnet", AuthInfo: "svcnet-admin", Namespace: "default"}
	cfg.CurrentContext = "svcnet"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return b, nil
}

// WriteKubeconfig writes Kubeconfig's kubeconfig to path.
func WriteKubeconfig(path, server string, caPEM []byte, client pki.Pair) error {
	b, err := Kubeconfig(server, caPEM, client)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
