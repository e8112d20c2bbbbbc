// Package trustbundle gives the node the trust anchors of ClusterTrustBundles
// that projected volumes name (clusterTrustBundle sources), as the
// kubelet's clustertrustbundle manager does: one bundle by name, or every
// bundle of a signer whose labels match a selector (a nil selector matches
// none, an empty one all); the certificates are deduplicated and written
// as PEM in an order that is stable while the node runs and differs from
// one start to the next. The bundles are watched once a volume first
// needs them.
package trustbundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listers "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// Manager reads ClusterTrustBundles through an informer it starts on
// first use.
type Manager struct {
	client kubernetes.Interface
	ctx    context.Context
	// seed orders the anchors for this run of the node.
	seed [8]byte

	mu      sync.Mutex
	lister  listers.ClusterTrustBundleLister
	synced  cache.InformerSynced
	factory informers.SharedInformerFactory
}

// New makes a manager whose informer, once started, runs until ctx ends.
func New(ctx context.Context, client kubernetes.Interface) *Manager {
	m := &Manager{client: client, ctx: ctx}
	for i := range m.seed {
		m.seed[i] = byte(rand.Uint32())
	}
	return m
}

// Shutdown waits for the informer, if started, to stop (after ctx ended).
func (m *Manager) Shutdown() {
	m.mu.Lock()
	f := m.factory
	m.mu.Unlock()
	if f != nil {
		f.Shutdown()
	}
}

// start starts the informer; its list must be read before answers.
func (m *Manager) start() (listers.ClusterTrustBundleLister, error) {
	m.mu.Lock()
	if m.factory == nil {
		m.factory = informers.NewSharedInformerFactory(m.client, 0)
		inf := m.factory.Certificates().V1().ClusterTrustBundles()
		m.lister, m.synced = inf.Lister(), inf.Informer().HasSynced
		m.factory.Start(m.ctx.Done())
	}
	lister, synced := m.lister, m.synced
	m.mu.Unlock()
	if !synced() {
		return nil, errors.New("ClusterTrustBundle informer has not yet synced")
	}
	return lister, nil
}

// ByName is the anchors of the bundle name; none when it does not exist
// and allowMissing says that is fine.
func (m *Manager) ByName(name string, allowMissing bool) ([]byte, error) {
	lister, err := m.start()
	if err != nil {
		return nil, err
	}
	b, err := lister.Get(name)
	if apierrors.IsNotFound(err) && allowMissing {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
	}
	return m.anchors([]*certificatesv1.ClusterTrustBundle{b}), nil
}

// BySigner is the anchors of every bundle of signer whose labels match
// selector; none matching is an error unless allowMissing.
func (m *Manager) BySigner(signer string, selector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	lister, err := m.start()
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("while parsing label selector: %w", err)
	}
	all, err := lister.List(sel)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", selector, err)
	}
	var matched []*certificatesv1.ClusterTrustBundle
	for _, b := range all {
		if b.Spec.SignerName == signer {
			matched = append(matched, b)
		}
	}
	if len(matched) == 0 {
		if allowMissing {
			return []byte{}, nil
		}
		return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
	}
	return m.anchors(matched), nil
}

// anchors are the bundles' certificates, each once, as PEM.
func (m *Manager) anchors(bundles []*certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	var ders [][]byte
	for _, b := range bundles {
		rest := []byte(b.Spec.TrustBundle)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if !seen[string(block.Bytes)] {
				seen[string(block.Bytes)] = true
				ders = append(ders, block.Bytes)
			}
		}
	}
	slices.SortFunc(ders, func(a, b []byte) int { return bytes.Compare(m.rank(a), m.rank(b)) })
	out := []byte{}
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}

// rank places a certificate in this run's order.
func (m *Manager) rank(der []byte) []byte {
	h := sha256.New()
	h.Write(m.seed[:])
	h.Write(der)
	return h.Sum(nil)
}
