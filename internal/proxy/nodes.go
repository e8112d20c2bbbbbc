package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FrontendsPath is where a node's agent serves its proxy's frontends (a
// FrontendList), below the API server's nodes/NAME/proxy; its query's
// service (namespace/name) asks for one Service's.
const FrontendsPath = "proxy/frontends"

// NodeFrontends is one node's frontends as its agent answered, with its
// proxy's last sync, or why it did not answer.
type NodeFrontends struct {
	Node      string     `json:"node"`
	Frontends []Frontend `json:"frontends"`
	LastSync  time.Time  `json:"lastSync,omitzero"`
	Error     string     `json:"error,omitempty"`
}

// ReadNodes asks each node (only the one named by node, if set) for its
// frontends, through the API server's nodes/proxy, sorted by node and
// then as SortFrontends: those of the Service service (namespace/name),
// or all when it is empty. A node that does not answer has its error; the
// error is the node list's.
func ReadNodes(ctx context.Context, client kubernetes.Interface, node, service string) ([]NodeFrontends, error) {
	names := []string{node}
	if node == "" {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		names = names[:0]
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		slices.Sort(names)
	}
	out := make([]NodeFrontends, 0, len(names))
	for _, name := range names {
		n := NodeFrontends{Node: name, Frontends: []Frontend{}}
		req := client.CoreV1().RESTClient().Get().Resource("nodes").Name(name).SubResource("proxy").Suffix(FrontendsPath)
		if service != "" {
			req = req.Param("service", service)
		}
		// Result.Error, unlike DoRaw, reads the agent's Status.
		res := req.Do(ctx)
		var list FrontendList
		err := res.Error()
		if err == nil {
			body, _ := res.Raw()
			if err = json.Unmarshal(body, &list); err != nil {
				err = fmt.Errorf("decode the answer: %w", err)
			}
		}
		if err != nil {
			n.Error = fmt.Sprintf("get nodes/%s/proxy/%s: %v", name, FrontendsPath, err)
		} else {
			if list.Frontends != nil {
				n.Frontends = list.Frontends
				SortFrontends(n.Frontends)
			}
			n.LastSync = list.LastSync
		}
		out = append(out, n)
	}
	return out, nil
}
