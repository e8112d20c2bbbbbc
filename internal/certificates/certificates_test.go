package certificates

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"

	capi "k8s.io/api/certificates/v1"
)

func TestSignerRules(t *testing.T) {
	node := pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}
	client := []capi.KeyUsage{capi.UsageClientAuth, capi.UsageDigitalSignature}
	serving := []capi.KeyUsage{capi.UsageServerAuth, capi.UsageKeyEncipherment, capi.UsageDigitalSignature}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"kubelet client", ValidateKubeletClient(&x509.CertificateRequest{Subject: node}, client), ""},
		{"kubelet client, duplicate usage", ValidateKubeletClient(&x509.CertificateRequest{Subject: node}, append(client, capi.UsageClientAuth)), ""},
		{"kubelet client of another group", ValidateKubeletClient(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a"}}, client),
			"subject organization is not system:nodes"},
		{"kubelet client of another user", ValidateKubeletClient(&x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane", Organization: []string{"system:nodes"}}}, client),
			"subject common name does not begin with system:node:"},
		{"kubelet client with a DNS name", ValidateKubeletClient(&x509.CertificateRequest{Subject: node, DNSNames: []string{"a"}}, client),
			"DNS subjectAltNames are not allowed"},
		{"kubelet client for serving", ValidateKubeletClient(&x509.CertificateRequest{Subject: node}, serving),
			"usages did not match [client auth digital signature key encipherment]"},
		{"kubelet serving", ValidateKubeletServing(&x509.CertificateRequest{Subject: node, IPAddresses: []net.IP{{10, 0, 0, 1}}}, serving), ""},
		{"kubelet serving without a name", ValidateKubeletServing(&x509.CertificateRequest{Subject: node}, serving),
			"DNS or IP subjectAltName is required"},
		{"kubelet serving for clients", ValidateKubeletServing(&x509.CertificateRequest{Subject: node, DNSNames: []string{"a"}}, client),
			"usages did not match [digital signature key encipherment server auth]"},
		{"API server client", ValidateAPIServerClient(client), ""},
		{"API server client for serving", ValidateAPIServerClient(serving), "invalid usage for client certificate: server auth"},
		{"API server client without client auth", ValidateAPIServerClient([]capi.KeyUsage{capi.UsageDigitalSignature}),
			"missing required usage for client certificate: client auth"},
	} {
		if got := errText(tt.err); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if _, err := ParseCSR([]byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")); errText(err) != "PEM block type must be CERTIFICATE REQUEST" {
		t.Errorf("parse a certificate: %v", err)
	}
}
