// Command coredns is CoreDNS with only its kubernetes plugin (and bind, to
// listen on loopback only): the baseline that bench/dns measures svcnet's
// cluster DNS against. It is a module of its own so that CoreDNS's
// dependencies stay out of svcnet's; bench/dns builds it with `go build`
// when asked to (-coredns).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	// The plugin chain: the Corefile may use these directives and no others.
	dnsserver.Directives = []string{"bind", "kubernetes"}
}

func main() {
	coremain.Run()
}
