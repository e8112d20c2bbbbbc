package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/auth/nodeauthorizer"
	"github.com/svcnet/svcnet/internal/lb/speaker"
	"github.com/svcnet/svcnet/internal/netns"
)

// SpeakerOptions configure a layer 2 speaker run alone (svcnet speaker).
type SpeakerOptions struct {
	Kubeconfig string
	// NodeName is the node it announces from.
	NodeName string
	// NetNS names the node's network namespace.
	NetNS string
}

// RunSpeaker runs a node's layer 2 speaker until ctx ends.
func RunSpeaker(ctx context.Context, o SpeakerOptions) error {
	if o.NodeName == "" {
		return fmt.Errorf("--node-name is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
	}
	return runSpeaker(ctx, cfg, o.NodeName, o.NetNS)
}

// runSpeaker runs the speaker of node nodeName, whose network lives in
// the namespace named netnsName, until ctx ends.
func runSpeaker(ctx context.Context, cfg *rest.Config, nodeName, netnsName string) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	return speaker.Run(ctx, speaker.Config{Client: client, Dynamic: dyn, NodeName: nodeName, NetNS: netns.Path(netnsName),
		Logger: slog.Default().With("node", nodeName)})
}

// ensureSpeakerRBAC writes the speaker's ClusterRole and its binding to
// the speaker's user and to the nodes.
func ensureSpeakerRBAC(ctx context.Context, client kubernetes.Interface) error {
	rbac := client.RbacV1()
	err := ensure(ctx, speaker.ClusterRole(), rbac.ClusterRoles(), func(cur, want *rbacv1.ClusterRole) bool {
		same := reflect.DeepEqual(cur.Rules, want.Rules)
		cur.Rules = want.Rules
		return same
	})
	if err != nil {
		return fmt.Errorf("speaker role: %w", err)
	}
	err = ensure(ctx, speaker.ClusterRoleBinding(nodeauthorizer.Group), rbac.ClusterRoleBindings(), func(cur, want *rbacv1.ClusterRoleBinding) bool {
		same := reflect.DeepEqual(cur.Subjects, want.Subjects)
		cur.Subjects = want.Subjects
		return same
	})
	if err != nil {
		return fmt.Errorf("speaker role binding: %w", err)
	}
	return nil
}
