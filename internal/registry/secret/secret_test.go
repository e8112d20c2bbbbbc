package secret

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/registry/registrytest"
)

func TestDefault(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data:       map[string][]byte{"user": []byte("old"), "keep": []byte("x")},
		StringData: map[string]string{"user": "admin", "password": "s3cret"},
	}
	(strategy{}).Default(s)
	if s.Type != corev1.SecretTypeOpaque {
		t.Errorf("type = %q", s.Type)
	}
	if string(s.Data["user"]) != "admin" || string(s.Data["password"]) != "s3cret" || string(s.Data["keep"]) != "x" {
		t.Errorf("data = %q", s.Data)
	}
	if s.StringData != nil {
		t.Errorf("stringData kept: %v", s.StringData)
	}
	only := &corev1.Secret{StringData: map[string]string{"token": "t"}}
	(strategy{}).Default(only)
	if string(only.Data["token"]) != "t" {
		t.Errorf("data = %q", only.Data)
	}
	cols := Resource().Columns
	if cols[1].Cell(s) != "Opaque" || cols[2].Cell(s) != int64(3) {
		t.Errorf("cells = %v %v", cols[1].Cell(s), cols[2].Cell(s))
	}
	if Resource().Fields(s)["type"] != "Opaque" {
		t.Error("type field")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		secret corev1.Secret
		want   []string
	}{
		{"opaque", corev1.Secret{Data: map[string][]byte{"a": nil}}, nil},
		{"bad key", corev1.Secret{Data: map[string][]byte{"a b": nil}},
			[]string{`data[a b]: Invalid value: "a b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`}},
		{"tls", corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": nil}},
			[]string{"data[tls.key]: Required value"}},
		{"token", corev1.Secret{Type: corev1.SecretTypeServiceAccountToken},
			[]string{"metadata.annotations[kubernetes.io/service-account.name]: Required value"}},
		{"basic auth", corev1.Secret{Type: corev1.SecretTypeBasicAuth},
			[]string{"data[username]: Required value", "data[password]: Required value"}},
		{"basic auth password only", corev1.Secret{Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": nil}}, nil},
		{"ssh", corev1.Secret{Type: corev1.SecretTypeSSHAuth}, []string{"data[ssh-privatekey]: Required value"}},
		{"dockerconfigjson", corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte("{")}},
			[]string{`data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": unexpected end of JSON input`}},
		{"dockercfg missing", corev1.Secret{Type: corev1.SecretTypeDockercfg}, []string{"data[.dockercfg]: Required value"}},
		{"too big", corev1.Secret{Data: map[string][]byte{"big": make([]byte, corev1.MaxSecretSize+1)}},
			[]string{"data: Too long: may not be more than 1048576 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.secret
			(strategy{}).Default(&s)
			registrytest.ExpectErrors(t, strategy{}.Validate(&s), tt.want...)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := &corev1.Secret{Type: corev1.SecretTypeOpaque, Immutable: ptr.To(true), Data: map[string][]byte{"a": []byte("1")}}
	changed := old.DeepCopy()
	changed.Type = "example.com/custom"
	changed.Data["a"] = []byte("2")
	changed.Immutable = nil
	registrytest.ExpectErrors(t, strategy{}.ValidateUpdate(changed, old),
		`type: Invalid value: "example.com/custom": field is immutable`,
		"immutable: Forbidden: field is immutable when `immutable` is set",
		"data: Forbidden: field is immutable when `immutable` is set",
	)
}
