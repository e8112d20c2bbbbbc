package authn

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
)

// DefaultTokenCacheTTL is kube-apiserver's --token-success-cache-ttl
// default: how long an accepted token is taken without checking it again.
const DefaultTokenCacheTTL = 10 * time.Second

// Cached remembers the tokens an authenticator accepted for TTL, as
// kube-apiserver's token cache: a token's signature and the objects it
// names are checked once per TTL, not on every request (so a revoked
// token may work for up to TTL). Refusals are not remembered.
type Cached struct {
	Next TokenAuthenticator
	TTL  time.Duration

	mu      sync.Mutex
	entries map[[sha256.Size]byte]cachedUser
}

type cachedUser struct {
	u       user.Info
	expires time.Time
}

// maxCachedTokens bounds the cache; past it, expired entries are dropped.
const maxCachedTokens = 10000

// AuthenticateToken implements TokenAuthenticator.
func (c *Cached) AuthenticateToken(ctx context.Context, token string) (user.Info, bool, error) {
	key := sha256.Sum256([]byte(token))
	if auds, ok := AudiencesFrom(ctx); ok {
		key = sha256.Sum256([]byte(token + "\x00" + strings.Join(auds, "\x00")))
	}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.u, true, nil
	}
	u, ok, err := c.Next.AuthenticateToken(ctx, token)
	if err != nil || !ok {
		return u, ok, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[sha256.Size]byte]cachedUser{}
	}
	if len(c.entries) >= maxCachedTokens {
		for k, v := range c.entries {
			if !now.Before(v.expires) {
				delete(c.entries, k)
			}
		}
	}
	if len(c.entries) < maxCachedTokens {
		c.entries[key] = cachedUser{u: u, expires: now.Add(c.TTL)}
	}
	return u, true, nil
}
