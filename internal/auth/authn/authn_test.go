package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
)

// tokens accepts "good" as alice and counts the calls.
type tokens struct{ calls int }

func (t *tokens) AuthenticateToken(_ context.Context, token string) (user.Info, bool, error) {
	t.calls++
	switch token {
	case "good":
		return &user.DefaultInfo{Name: "alice"}, true, nil
	case "bad":
		return nil, false, errors.New("expired")
	}
	return nil, false, nil
}

func TestAuthenticate(t *testing.T) {
	tok := &tokens{}
	a := &Authenticator{Tokens: []TokenAuthenticator{&Cached{Next: tok, TTL: time.Hour}}}
	who := func(header string, cert *x509.Certificate) (string, []string, error) {
		r := httptest.NewRequest("GET", "/api", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		if cert != nil {
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
		}
		u, err := a.Authenticate(r)
		if err != nil {
			return "", nil, err
		}
		return u.GetName(), u.GetGroups(), nil
	}
	jane := &x509.Certificate{Subject: pkix.Name{CommonName: "jane", Organization: []string{"dev", "ops"}}}
	for _, c := range []struct {
		header string
		cert   *x509.Certificate
		name   string
		groups []string
		err    bool
	}{
		{cert: jane, name: "jane", groups: []string{"dev", "ops", "system:authenticated"}},
		{header: "Bearer good", name: "alice", groups: []string{"system:authenticated"}},
		{header: "bearer good", name: "alice", groups: []string{"system:authenticated"}},
		{header: "Bearer bad", err: true},
		{header: "Bearer unknown", err: true},
		{header: "Basic abc", name: "system:anonymous", groups: []string{"system:unauthenticated"}},
		{name: "system:anonymous", groups: []string{"system:unauthenticated"}},
	} {
		name, groups, err := who(c.header, c.cert)
		if (err != nil) != c.err || name != c.name || !slices.Equal(groups, c.groups) {
			t.Errorf("%q cert=%v: %s %v %v", c.header, c.cert != nil, name, groups, err)
		}
	}
	// "good" was checked once: the cache answered the second time.
	calls := tok.calls
	if _, _, err := who("Bearer good", nil); err != nil || tok.calls != calls {
		t.Errorf("cached token checked again: %d calls, was %d (%v)", tok.calls, calls, err)
	}
}
