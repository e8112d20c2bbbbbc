// Command widget-operator is a controller built with controller-runtime, as
// operators are: one reconciler on the e2e tests' Widget kind, which marks
// each widget ready and keeps a ConfigMap owned by it holding its size.
package main

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var widgetKind = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

type reconciler struct{ client.Client }

func (r reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetKind)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "widget-" + w.GetName(), Namespace: w.GetNamespace()}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		cm.Data = map[string]string{"size": fmt.Sprint(size)}
		return controllerutil.SetControllerReference(w, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	if ready, _, _ := unstructured.NestedBool(w.Object, "status", "ready"); ready {
		return ctrl.Result{}, nil
	}
	if err := unstructured.SetNestedField(w.Object, true, "status", "ready"); err != nil {
		return ctrl.Result{}, err
	}
	err := r.Status().Update(ctx, w)
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}

func main() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetKind)
	if err := ctrl.NewControllerManagedBy(mgr).For(w).Owns(&corev1.ConfigMap{}).Complete(reconciler{mgr.GetClient()}); err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}
