// Package serviceaccounttoken is upstream's serviceaccount-token-controller
// (kube-controller-manager's pkg/controller/serviceaccount tokens
// controller): a Secret of type kubernetes.io/service-account-token
// annotated kubernetes.io/service-account.name gets, once its
// ServiceAccount exists, a legacy token of that ServiceAccount in
// data.token, the root CA bundle in data.ca.crt and its namespace in
// data.namespace, and the ServiceAccount's UID in the annotation
// kubernetes.io/service-account.uid. A token Secret whose ServiceAccount
// is gone, or is another of the same name, is deleted; a deleted token
// Secret is dropped from its ServiceAccount's secrets. As upstream, it
// runs with the controller manager's own client, not a ServiceAccount.
package serviceaccounttoken

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	apiserverserviceaccount "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/svcnet/svcnet/internal/auth/serviceaccount"
	"github.com/svcnet/svcnet/internal/controller"
	"github.com/svcnet/svcnet/internal/informer"
)

// Upstream's names.
const (
	// ControllerName is the --controllers name.
	ControllerName = "serviceaccount-token-controller"
	// Alias is the older --controllers name upstream still accepts.
	Alias = "serviceaccount-token"
	// ClientName is the user agent of its client, upstream's.
	ClientName = "tokens-controller"
	// workers is upstream's --concurrent-serviceaccount-token-syncs default.
	workers = 5
	// maxRetries is upstream's.
	maxRetries = 10
)

// Controller is the tokens controller.
type Controller struct {
	client   kubernetes.Interface
	issuer   *serviceaccount.Issuer
	rootCA   []byte
	accounts corelisters.ServiceAccountLister
	secrets  corelisters.SecretLister
	synced   []cache.InformerSynced
	saQueue  *controller.Queue[accountKey]
	secQueue *controller.Queue[secretKey]
}

// accountKey names a ServiceAccount as it was seen.
type accountKey struct {
	namespace, name string
	uid             types.UID
}

// secretKey names a token Secret and the ServiceAccount it names (saUID
// blank until the controller filled it in).
type secretKey struct {
	namespace, name string
	uid             types.UID
	saName          string
	saUID           types.UID
}

// New creates the controller, signing with key and writing rootCA (may be
// empty) as ca.crt.
func New(d controller.Deps, key *serviceaccount.Key, rootCA []byte) (*Controller, error) {
	core := d.Informers.Core().V1()
	c := &Controller{
		client:   d.Client,
		issuer:   &serviceaccount.Issuer{Key: key, Issuer: serviceaccount.LegacyIssuer},
		rootCA:   rootCA,
		accounts: core.ServiceAccounts().Lister(),
		secrets:  core.Secrets().Lister(),
	}
	c.saQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[accountKey]{Name: "serviceaccount_tokens_service", MaxRetries: maxRetries, Sync: c.syncServiceAccount})
	c.secQueue = controller.NewQueue(d.Metrics, controller.QueueConfig[secretKey]{Name: "serviceaccount_tokens_secret", MaxRetries: maxRetries, Sync: c.syncSecret})
	synced, err := informer.Register(
		informer.Handler{Informer: core.ServiceAccounts().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onServiceAccount,
			UpdateFunc: func(_, cur any) { c.onServiceAccount(cur) },
			DeleteFunc: c.onServiceAccount,
		}},
		informer.Handler{Informer: core.Secrets().Informer(), Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onSecret,
			UpdateFunc: func(_, cur any) { c.onSecret(cur) },
			DeleteFunc: c.onSecret,
		}},
	)
	if err != nil {
		return nil, fmt.Errorf("service account token controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// Run keeps the token Secrets until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.saQueue.Run(ctx, workers, c.synced...)
	}()
	c.secQueue.Run(ctx, workers, c.synced...)
	<-done
}

func (c *Controller) onServiceAccount(obj any) {
	if sa, ok := informer.Object[*corev1.ServiceAccount](obj); ok && sa.UID != "" {
		c.saQueue.Add(accountKey{namespace: sa.Namespace, name: sa.Name, uid: sa.UID})
	}
}

func (c *Controller) onSecret(obj any) {
	s, ok := informer.Object[*corev1.Secret](obj)
	if !ok || s.Type != corev1.SecretTypeServiceAccountToken || s.UID == "" || s.Annotations[corev1.ServiceAccountNameKey] == "" {
		return
	}
	c.secQueue.Add(secretKey{namespace: s.Namespace, name: s.Name, uid: s.UID,
		saName: s.Annotations[corev1.ServiceAccountNameKey], saUID: types.UID(s.Annotations[corev1.ServiceAccountUIDKey])})
}

// syncServiceAccount deletes the token Secrets of a ServiceAccount gone.
func (c *Controller) syncServiceAccount(ctx context.Context, k accountKey) error {
	sa, err := c.account(ctx, k.namespace, k.name, k.uid, false)
	if err != nil || sa != nil {
		return err
	}
	gone := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: k.namespace, Name: k.name, UID: k.uid}}
	secrets, err := c.secrets.Secrets(k.namespace).List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list Secrets of %s: %w", k.namespace, err)
	}
	var errs []error
	for _, s := range secrets {
		if apiserverserviceaccount.IsServiceAccountToken(s, gone) {
			errs = append(errs, c.deleteToken(ctx, s.Namespace, s.Name, s.UID))
		}
	}
	return errors.Join(errs...)
}

// syncSecret fills in a token Secret, or deletes it when its
// ServiceAccount is gone, or drops a deleted one from its ServiceAccount.
func (c *Controller) syncSecret(ctx context.Context, k secretKey) error {
	secret, err := c.secrets.Secrets(k.namespace).Get(k.name)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && secret.UID != k.uid):
		if sa, err := c.account(ctx, k.namespace, k.saName, k.saUID, false); err == nil && sa != nil {
			if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error { return c.removeReference(ctx, k) }); err != nil {
				slog.Error("removing secret reference", "controller", ControllerName, "secret", k.namespace+"/"+k.name, "err", err)
			}
		}
		return nil
	case err != nil:
		return fmt.Errorf("get Secret %s/%s: %w", k.namespace, k.name, err)
	}
	sa, err := c.account(ctx, k.namespace, k.saName, k.saUID, true)
	switch {
	case err != nil:
		return err
	case sa == nil:
		slog.Debug("service account does not exist, deleting token", "controller", ControllerName, "secret", k.namespace+"/"+k.name)
		return c.deleteToken(ctx, k.namespace, k.name, k.uid)
	}
	return c.fill(ctx, sa, secret)
}

// needs says which of ca.crt, namespace and token secret lacks.
func (c *Controller) needs(secret *corev1.Secret) (ca, ns, token bool) {
	ca = len(c.rootCA) > 0 && !bytes.Equal(secret.Data[corev1.ServiceAccountRootCAKey], c.rootCA)
	ns = len(secret.Data[corev1.ServiceAccountNamespaceKey]) == 0
	token = len(secret.Data[corev1.ServiceAccountTokenKey]) == 0
	return ca, ns, token
}

// fill writes what the token Secret lacks into a fresh copy of it.
func (c *Controller) fill(ctx context.Context, sa *corev1.ServiceAccount, cached *corev1.Secret) error {
	if ca, ns, token := c.needs(cached); !ca && !ns && !token {
		return nil
	}
	secrets := c.client.CoreV1().Secrets(cached.Namespace)
	live, err := secrets.Get(ctx, cached.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Secret %s/%s: %w", cached.Namespace, cached.Name, err)
	}
	if live.ResourceVersion != cached.ResourceVersion {
		// The update event to come brings it back.
		return nil
	}
	ca, ns, token := c.needs(live)
	if !ca && !ns && !token {
		return nil
	}
	if live.Annotations == nil {
		live.Annotations = map[string]string{}
	}
	if live.Data == nil {
		live.Data = map[string][]byte{}
	}
	if ca {
		live.Data[corev1.ServiceAccountRootCAKey] = c.rootCA
	}
	if ns {
		live.Data[corev1.ServiceAccountNamespaceKey] = []byte(live.Namespace)
	}
	if token {
		t, err := c.issuer.LegacyToken(sa, live)
		if err != nil {
			slog.Error("populating serviceaccount token", "controller", ControllerName, "secret", live.Namespace+"/"+live.Name, "err", err)
			return nil
		}
		live.Data[corev1.ServiceAccountTokenKey] = []byte(t)
	}
	live.Annotations[corev1.ServiceAccountNameKey] = sa.Name
	live.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
	if err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("update Secret %s/%s: %w", live.Namespace, live.Name, err)
}

// deleteToken deletes a token Secret, if it still has uid.
func (c *Controller) deleteToken(ctx context.Context, ns, name string, uid types.UID) error {
	var opts metav1.DeleteOptions
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.client.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("delete Secret %s/%s: %w", ns, name, err)
}

// removeReference drops a deleted token Secret from its ServiceAccount's
// secrets.
func (c *Controller) removeReference(ctx context.Context, k secretKey) error {
	accounts := c.client.CoreV1().ServiceAccounts(k.namespace)
	sa, err := accounts.Get(ctx, k.saName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if k.saUID != "" && k.saUID != sa.UID {
		return nil
	}
	var kept []corev1.ObjectReference
	for _, r := range sa.Secrets {
		if r.Name != k.name {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(sa.Secrets) {
		return nil
	}
	sa.Secrets = kept
	_, err = accounts.Update(ctx, sa, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// account is the ServiceAccount of that name (and uid, if given) from the
// cache, else, if live, from the API; nil when there is none.
func (c *Controller) account(ctx context.Context, ns, name string, uid types.UID, live bool) (*corev1.ServiceAccount, error) {
	sa, err := c.accounts.ServiceAccounts(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if sa != nil && (uid == "" || uid == sa.UID) {
		return sa, nil
	}
	if !live {
		return nil, nil
	}
	sa, err = c.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ServiceAccount %s/%s: %w", ns, name, err)
	}
	if uid == "" || uid == sa.UID {
		return sa, nil
	}
	return nil, nil
}
