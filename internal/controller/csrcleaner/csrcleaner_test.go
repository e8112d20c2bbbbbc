package csrcleaner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/controller/controllertest"
)

func certificate(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestExpired(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	with := func(created time.Duration, cert []byte, conditions ...capi.CertificateSigningRequestCondition) *capi.CertificateSigningRequest {
		return &capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: ago(created)},
			Status: capi.CertificateSigningRequestStatus{Conditions: conditions, Certificate: cert}}
	}
	cond := func(t capi.RequestConditionType, updated time.Duration) capi.CertificateSigningRequestCondition {
		return capi.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue, LastUpdateTime: ago(updated)}
	}
	valid, gone := certificate(t, now.Add(time.Hour)), certificate(t, now.Add(-time.Minute))
	for _, tt := range []struct {
		name string
		csr  *capi.CertificateSigningRequest
		want string
	}{
		{"new pending", with(23*time.Hour, nil), ""},
		{"old pending", with(25*time.Hour, nil), "pending for more than a day"},
		{"just issued", with(2*time.Hour, valid, cond(capi.CertificateApproved, 59*time.Minute)), ""},
		{"issued an hour ago", with(2*time.Hour, valid, cond(capi.CertificateApproved, 61*time.Minute)), "issued more than an hour ago"},
		{"issued, expired", with(2*time.Hour, gone, cond(capi.CertificateApproved, time.Minute)), "its certificate has expired"},
		{"just denied", with(2*time.Hour, nil, cond(capi.CertificateDenied, 59*time.Minute)), ""},
		{"denied an hour ago", with(2*time.Hour, nil, cond(capi.CertificateDenied, 61*time.Minute)), "denied more than an hour ago"},
		{"failed an hour ago", with(2*time.Hour, nil, cond(capi.CertificateApproved, 61*time.Minute), cond(capi.CertificateFailed, 61*time.Minute)), "failed more than an hour ago"},
		{"approved, unissued for hours", with(25*time.Hour, nil, cond(capi.CertificateApproved, 23*time.Hour)), ""},
		{"approved, unissued for a day", with(26*time.Hour, nil, cond(capi.CertificateApproved, 25*time.Hour)), "approved but not issued for more than a day"},
	} {
		if got := expired(tt.csr, now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestClean(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-25 * time.Hour))
	cs := controllertest.NewClient(
		&capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: old, UID: "1"}},
		&capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "new", CreationTimestamp: metav1.Now(), UID: "2"}},
	)
	var c *Controller
	controllertest.Start(t, cs, func(_ context.Context, d controller.Deps) []func(context.Context) {
		c = New(d)
		return []func(context.Context){c.Run}
	})
	controllertest.Eventually(t, func() string {
		list, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, []string{"new"}) {
			return fmt.Sprintf("requests left: %v", names)
		}
		return ""
	})
}
