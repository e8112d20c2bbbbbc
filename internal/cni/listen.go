package cni

import (
	"net"

	"github.com/svcnet/svcnet/internal/netns"
)

// Listen opens a stream listener in the node's namespace, for servers
// that belong to the node's network, such as the kubelet server of a node
// of svcnet up --nodes N on its own address.
func (n *Network) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := netns.DoIn(n.node, func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}
