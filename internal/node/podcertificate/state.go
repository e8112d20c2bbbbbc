package podcertificate

import (
	"context"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// state is one projection's, as the kubelet's state machine: no
// credentials and no request yet; a request pending; credentials (and,
// once beginRefreshAt has passed, a pending request to replace them); or
// final, once a request was denied or failed.
type state struct {
	// key and chain are the credentials handed out (PEM), nil until the
	// first certificate is issued; refreshAt is when to replace them,
	// notAfter when they expire.
	key, chain          []byte
	refreshAt, notAfter time.Time
	// overdue and expired are set once the events saying so are
	// recorded for these credentials.
	overdue, expired bool

	// pending names the request waiting for its signer, pendingKey the
	// key it was made for; abandonAt is when it is taken as deleted if
	// the watch has not shown it.
	pending    string
	pendingKey []byte
	abandonAt  time.Time

	// final is why no credentials will come.
	final error
}

// advance moves st on: it makes a request when there are no credentials
// or it is time to replace them, and takes a pending request's outcome;
// changed says the credentials handed out changed.
func (m *Manager) advance(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection, k key, st *state) (changed bool, err error) {
	now := m.now()
	switch {
	case st.final != nil:
		return false, nil
	case st.pending != "":
		return m.check(pod, k, st, now)
	case st.key != nil && now.Before(st.refreshAt):
		return false, nil
	}
	m.reportStale(pod, st, now)
	r, keyPEM, err := m.request(ctx, pod, src)
	if err != nil {
		if st.key == nil {
			return false, fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		return false, fmt.Errorf("while creating refresh PodCertificateRequest: %w", err)
	}
	st.pending, st.pendingKey = r.Name, keyPEM
	st.abandonAt = r.CreationTimestamp.Add(abandonAfter + jitter())
	return false, nil
}

// check looks at the pending request: issued, it gives the credentials;
// denied or failed, it ends the projection; gone for too long, it is made
// anew.
func (m *Manager) check(pod *corev1.Pod, k key, st *state, now time.Time) (changed bool, err error) {
	name := pod.Namespace + "/" + st.pending
	r, err := m.requests.PodCertificateRequests(pod.Namespace).Get(st.pending)
	switch {
	case apierrors.IsNotFound(err) && now.After(st.abandonAt):
		// The watch may lag, but not for this long: deleted.
		st.pending, st.pendingKey, st.abandonAt = "", nil, time.Time{}
		return false, fmt.Errorf("PodCertificateRequest %q appears to have been deleted", name)
	case err != nil:
		return false, fmt.Errorf("while getting PodCertificateRequest %q: %w", name, err)
	}
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			m.end(pod, st, c, name)
			return true, nil
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			*st = state{
				key:       st.pendingKey,
				chain:     cleanChain(r.Status.CertificateChain),
				refreshAt: ptr.Deref(r.Status.BeginRefreshAt, metav1.Time{}).Add(jitter()),
				notAfter:  ptr.Deref(r.Status.NotAfter, metav1.Time{}).Time,
			}
			m.queue.AddAfter(k, st.refreshAt.Sub(now))
			return true, nil
		}
	}
	// Pending: its next change brings it back.
	m.reportStale(pod, st, now)
	return false, nil
}

// end makes a request denied or failed (c) the projection's last word,
// and records why on the pod.
func (m *Manager) end(pod *corev1.Pod, st *state, c metav1.Condition, name string) {
	outcome := strings.ToLower(c.Type)
	*st = state{final: fmt.Errorf("PodCertificateRequest was permanently %s: reason=%q message=%q", outcome, c.Reason, c.Message)}
	if c.Type == certificatesv1.PodCertificateRequestConditionTypeDenied {
		outcome = "was denied"
	}
	m.cfg.Recorder.Event(pod, corev1.EventTypeWarning, c.Type,
		fmt.Sprintf("PodCertificateRequest %s %s, reason=%q, message=%q", name, outcome, c.Reason, c.Message))
}

// reportStale records, once for each set of credentials, that they are
// overdue for refresh and that they have expired.
func (m *Manager) reportStale(pod *corev1.Pod, st *state, now time.Time) {
	if st.key == nil {
		return
	}
	if !st.overdue && now.After(st.refreshAt.Add(overdueAfter)) {
		m.cfg.Recorder.Event(pod, corev1.EventTypeWarning, "CertificateOverdueForRefresh", "PodCertificate refresh overdue")
		st.overdue = true
	}
	if !st.expired && now.After(st.notAfter) {
		m.cfg.Recorder.Event(pod, corev1.EventTypeWarning, "CertificateExpired", "PodCertificate expired")
		st.expired = true
	}
}
