package cni

import (
	"net"

	"github.com/svcnet/svcnet/internal/netns"
)

// Listen opens a stream listener in the node's namespace, for servers
// that belong to the node's network, such as its cluster DNS on the
// bridge address.
func (n *Network) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := netns.DoIn(n.node, func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// ListenPacket opens a packet listener in the node's namespace.
func (n *Network) ListenPacket(network, address string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := netns.DoIn(n.node, func() error {
		var err error
		pc, err = net.ListenPacket(network, address)
		return err
	})
	return pc, err
}
