package serviceaccount

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objects is an Objects over maps.
type objects struct {
	sas  map[string]*corev1.ServiceAccount
	pods map[string]*corev1.Pod
}

func (o objects) ServiceAccount(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := o.sas[ns+"/"+name]; ok {
		return sa, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
}

func (o objects) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p, ok := o.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}

func (objects) Secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

func (objects) Node(_ context.Context, name string) (*corev1.Node, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if reread, err := LoadOrCreateKey(dir); err != nil || reread.ID() != key.ID() {
		t.Fatalf("the key is not kept: %v", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ns", UID: "sa-uid"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}
	objs := objects{sas: map[string]*corev1.ServiceAccount{"ns/default": sa}, pods: map[string]*corev1.Pod{"ns/web": pod}}
	iss := &Issuer{Key: key, Issuer: DefaultIssuer}
	a := &Authenticator{Issuer: DefaultIssuer, Key: key, Audiences: []string{DefaultIssuer}, Objects: objs}
	ctx := context.Background()

	tok, err := iss.Token(sa, Bound{Pod: pod, Node: node}, time.Hour, 0, []string{DefaultIssuer})
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's claims, "aud" a list.
	parts := strings.Split(tok, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var h map[string]any
	var c struct {
		Aud        []string `json:"aud"`
		Sub        string   `json:"sub"`
		Kubernetes struct {
			Namespace      string            `json:"namespace"`
			Pod            map[string]string `json:"pod"`
			Node           map[string]string `json:"node"`
			ServiceAccount map[string]string `json:"serviceaccount"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(header, &h); err != nil || h["alg"] != "RS256" || h["kid"] != key.ID() {
		t.Errorf("header %s: %v", header, err)
	}
	if err := json.Unmarshal(payload, &c); err != nil || len(c.Aud) != 1 || c.Sub != "system:serviceaccount:ns:default" ||
		c.Kubernetes.Pod["uid"] != "pod-uid" || c.Kubernetes.Node["name"] != "n1" || c.Kubernetes.ServiceAccount["uid"] != "sa-uid" {
		t.Errorf("claims %s: %v", payload, err)
	}

	u, ok, err := a.AuthenticateToken(ctx, tok)
	if err != nil || !ok || u.GetName() != "system:serviceaccount:ns:default" || u.GetUID() != "sa-uid" ||
		strings.Join(u.GetGroups(), ",") != "system:serviceaccounts,system:serviceaccounts:ns" ||
		u.GetExtra()["authentication.kubernetes.io/pod-name"][0] != "web" || u.GetExtra()["authentication.kubernetes.io/node-name"][0] != "n1" {
		t.Fatalf("authenticate: %v %v %v", u, ok, err)
	}
	// Not a token of this issuer: not ours to judge.
	if _, ok, err := a.AuthenticateToken(ctx, "abc.def.ghi"); ok || err != nil {
		t.Errorf("foreign token: %v %v", ok, err)
	}
	// Another audience, expired, bound to a pod that is gone or was
	// recreated: refused.
	other, _ := iss.Token(sa, Bound{}, time.Hour, 0, []string{"vault"})
	expired, _ := iss.Token(sa, Bound{}, -2*time.Minute, 0, []string{DefaultIssuer})
	for name, tk := range map[string]string{"audience": other, "expired": expired} {
		if _, ok, err := a.AuthenticateToken(ctx, tk); ok || err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	objs.pods["ns/web"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "new-uid"}}
	if _, ok, err := a.AuthenticateToken(ctx, tok); ok || err == nil || err.Error() != "service account token has been invalidated" {
		t.Errorf("recreated pod: %v %v", ok, err)
	}
	delete(objs.pods, "ns/web")
	if _, ok, err := a.AuthenticateToken(ctx, tok); ok || err == nil {
		t.Errorf("deleted pod: %v %v", ok, err)
	}
	// A tampered token fails its signature.
	if _, ok, err := a.AuthenticateToken(ctx, parts[0]+"."+parts[1]+"."+strings.Repeat("A", len(parts[2]))); ok || err == nil {
		t.Errorf("bad signature: %v %v", ok, err)
	}
	// Another data dir has another key.
	again, err := LoadOrCreateKey(t.TempDir())
	if err != nil || again.ID() == key.ID() {
		t.Errorf("a new dir makes a new key: %v", err)
	}
}
