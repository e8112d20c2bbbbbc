// Package token is the node's service account token manager, as the
// kubelet's: the token of a pod's serviceAccountToken projection is asked
// of the API server (TokenRequest, bound to the pod, with the
// projection's audience and expiry), kept, and asked anew once 80% of its
// lifetime (less a little jitter) or 24 hours have passed, so a pod always
// holds a valid token. Tokens of pods that are gone are forgotten.
package token

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Upstream's refresh bounds.
const (
	maxTTL    = 24 * time.Hour
	maxJitter = 10 * time.Second
)

// Manager hands out tokens.
type Manager struct {
	client kubernetes.Interface
	now    func() time.Time

	mu     sync.Mutex
	tokens map[key]*authenticationv1.TokenRequest
}

type key struct {
	pod        types.UID
	audience   string
	expiration int64
}

// New is a Manager asking client.
func New(client kubernetes.Interface) *Manager {
	return &Manager{client: client, now: time.Now, tokens: map[key]*authenticationv1.TokenRequest{}}
}

// Token is the token of pod's service account for the projection p.
func (m *Manager) Token(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	var exp int64 = 3600
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	k := key{pod: pod.UID, audience: p.Audience, expiration: exp}
	m.mu.Lock()
	tr := m.tokens[k]
	m.mu.Unlock()
	if tr != nil && !m.due(tr) {
		return []byte(tr.Status.Token), nil
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	got, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		if tr != nil && m.now().Before(tr.Status.ExpirationTimestamp.Time) {
			return []byte(tr.Status.Token), nil // still valid: try again next sync
		}
		return nil, fmt.Errorf("failed to fetch token: %w", err)
	}
	m.mu.Lock()
	m.tokens[k] = got
	m.mu.Unlock()
	return []byte(got.Status.Token), nil
}

// due reports whether a token wants refreshing, as the kubelet's
// requiresRefresh.
func (m *Manager) due(tr *authenticationv1.TokenRequest) bool {
	iat := tr.CreationTimestamp.Time
	exp := tr.Status.ExpirationTimestamp.Time
	jitter := time.Duration(rand.Float64() * float64(maxJitter))
	now := m.now()
	if now.After(iat.Add(maxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-exp.Sub(iat)*20/100 - jitter))
}

// Forget drops the tokens of a pod that is gone.
func (m *Manager) Forget(pod types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.tokens {
		if k.pod == pod {
			delete(m.tokens, k)
		}
	}
}
