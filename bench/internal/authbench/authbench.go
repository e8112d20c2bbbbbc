// Package authbench measures what authentication and authorization cost
// a request: GETs of one ConfigMap by a user bound to a Role through RBAC,
// against the same user on an API server with --authorization-mode
// AlwaysAllow, and the same GETs with a service account token against the
// client certificate, all in one run, in alternating rounds.
package authbench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/pki"
)

// Options size a run.
type Options struct {
	N       int // GETs per measurement and round
	Workers int
	Rounds  int
}

// Stat is one kind of request over all rounds.
type Stat struct {
	Name     string
	Ops      int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// Rate is requests per second.
func (s Stat) Rate() float64 { return float64(s.Ops) / s.Elapsed.Seconds() }

// Result holds the three measurements.
type Result struct {
	Options
	RBAC, AlwaysAllow, Token Stat
}

// Print writes the table and the two figures to track.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d GETs x %d rounds, %d workers\n", r.N, r.Rounds, r.Workers)
	for _, s := range []Stat{r.RBAC, r.AlwaysAllow, r.Token} {
		fmt.Fprintf(w, "%-34s %10.0f req/s  p50 %8s  p99 %8s\n", s.Name, s.Rate(), s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond))
	}
	fmt.Fprintf(w, "RBAC / AlwaysAllow rate: %.3f\n", r.RBAC.Rate()/r.AlwaysAllow.Rate())
	fmt.Fprintf(w, "token - certificate p50: %s\n", r.Token.P50-r.RBAC.P50)
}

// Run measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	rbacSrv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer rbacSrv.Stop()
	openSrv, err := benchenv.StartServer(ctx, func(a *cluster.APIServerOptions) {
		a.AuthorizationModes = []string{cluster.AuthorizationAlwaysAllow}
	})
	if err != nil {
		return nil, err
	}
	defer openSrv.Stop()
	var clients [3]kubernetes.Interface
	for i, srv := range []*benchenv.Server{rbacSrv, openSrv} {
		if clients[i], err = userClient(ctx, srv); err != nil {
			return nil, err
		}
	}
	if clients[2], err = tokenClient(ctx, rbacSrv); err != nil {
		return nil, err
	}
	names := []string{"cert user, RBAC", "cert user, AlwaysAllow", "service account token, RBAC"}
	for i, c := range clients {
		if err := allowed(ctx, c); err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
	}
	var lat [3][]time.Duration
	var elapsed [3]time.Duration
	for range o.Rounds {
		for i, c := range clients {
			d, l, err := gets(ctx, c, o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[i], err)
			}
			elapsed[i] += d
			lat[i] = append(lat[i], l...)
		}
	}
	var stats [3]Stat
	for i := range stats {
		slices.Sort(lat[i])
		stats[i] = Stat{Name: names[i], Ops: len(lat[i]), Elapsed: elapsed[i], P50: lat[i][len(lat[i])/2], P99: lat[i][len(lat[i])*99/100]}
	}
	return &Result{Options: o, RBAC: stats[0], AlwaysAllow: stats[1], Token: stats[2]}, nil
}

const ns, cm = "bench", "settings"

// prepare makes the ConfigMap, and binds a Role reading ConfigMaps in its
// namespace to the user "bench-user" and the ServiceAccount "reader" (not
// the aggregated view: the benchmark runs no aggregation controller).
func prepare(ctx context.Context, admin kubernetes.Interface) error {
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bench-user"}, {Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}}}
	_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// userClient is an unthrottled client of "bench-user", a certificate the
// server's CA signs.
func userClient(ctx context.Context, srv *benchenv.Server) (kubernetes.Interface, error) {
	if err := prepare(ctx, srv.Client); err != nil {
		return nil, err
	}
	dir := filepath.Join(srv.DataDir, "pki")
	ca, err := pki.LoadOrCreateCA(dir)
	if err != nil {
		return nil, err
	}
	pair, err := ca.Client(dir, "bench-user", "bench-user", nil)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: srv.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM, CertData: pair.CertPEM, KeyData: pair.KeyPEM}}
	return kubernetes.NewForConfig(cfg)
}

// tokenClient is an unthrottled client with a token of the
// ServiceAccount "reader".
func tokenClient(ctx context.Context, srv *benchenv.Server) (kubernetes.Interface, error) {
	secs := int64(3600)
	tr, err := srv.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(srv.DataDir, "pki"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM}})
}

// allowed waits until the binding reaches the server's RBAC cache.
func allowed(ctx context.Context, c kubernetes.Interface) error {
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
		return err == nil, nil
	})
}

// gets runs o.N GETs on o.Workers workers.
func gets(ctx context.Context, c kubernetes.Interface, o Options) (time.Duration, []time.Duration, error) {
	lat := make([]time.Duration, o.N)
	var mu sync.Mutex
	start := time.Now()
	err := benchenv.Parallel(o.N, o.Workers, func(i int) error {
		t := time.Now()
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, cm, metav1.GetOptions{})
		mu.Lock()
		lat[i] = time.Since(t)
		mu.Unlock()
		return err
	})
	return time.Since(start), lat, err
}
