package clusterauthenticationtrust

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	info := Info{ClientCA: []byte("client CA"), RequestHeaderCA: []byte("front-proxy CA"), RequestHeaderAllowed: []string{ProxyClientName}}
	if err := Ensure(ctx, client, info); err != nil {
		t.Fatal(err)
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"client-ca-file":                     "client CA",
		"requestheader-client-ca-file":       "front-proxy CA",
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-uid-headers":          `["X-Remote-Uid"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("%s = %q, want %q", k, cm.Data[k], v)
		}
	}
	if len(cm.Data) != len(want) {
		t.Errorf("data %v", cm.Data)
	}
	// A changed CA is written again.
	info.RequestHeaderCA = []byte("new front-proxy CA")
	if err := Ensure(ctx, client, info); err != nil {
		t.Fatal(err)
	}
	cm, _ = client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if cm.Data["requestheader-client-ca-file"] != "new front-proxy CA" {
		t.Errorf("not updated: %v", cm.Data)
	}
}
