package corefile

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// kubeadm is the Corefile kubeadm writes into kube-system/coredns.
const kubeadm = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

func resolv(path string) ([]byte, error) {
	if path != "/etc/resolv.conf" {
		return nil, errors.New("no such file")
	}
	return []byte("# generated\nsearch example.com\nnameserver 192.0.2.53\nnameserver 2001:db8::53\noptions ndots:1\n"), nil
}

func TestKubeadmCorefile(t *testing.T) {
	c, err := Parse(kubeadm, resolv)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Port: 53, Health: ":8080", Ready: ":8181", Prometheus: ":9153", Lameduck: 5 * time.Second,
		Zones: []string{"cluster.local", "in-addr.arpa", "ip6.arpa"}, TTL: 30,
		Forward:  []string{"192.0.2.53:53", "[2001:db8::53]:53"},
		CacheTTL: 30 * time.Second, Reload: true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

// The Corefile upstream's "configurable pod resolv.conf" test serves: a
// hosts plugin with an inline entry and no kubernetes plugin.
func TestHostsCorefile(t *testing.T) {
	c, err := Parse(". {\n\thosts {\n\t\t1.1.1.1 notexistname.resolv.conf.local\n\t\tttl 60\n\t\tfallthrough\n\t}\n\tlog\n}", func(string) ([]byte, error) {
		return []byte("127.0.0.1 localhost\n"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Hosts == nil || !c.Hosts.Fallthrough || len(c.Zones) != 0 {
		t.Fatalf("got %+v", c)
	}
	for name, want := range map[string]string{
		"notexistname.resolv.conf.local.": "notexistname.resolv.conf.local.\t60\tIN\tA\t1.1.1.1",
		"localhost.":                      "localhost.\t60\tIN\tA\t127.0.0.1", // the file's
	} {
		rrs, _, next := c.Hosts.Serve(dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET})
		if next || len(rrs) != 1 || rrs[0].String() != want {
			t.Errorf("%s: %v next=%v, want %q", name, rrs, next, want)
		}
	}
}

func TestCorefileVariants(t *testing.T) {
	c, err := Parse(`cluster.local:1053 {
  kubernetes cluster.local { kubeconfig /etc/coredns/kubeconfig admin }  # one line
  forward . 1.1.1.1 dns://9.9.9.9:5353 [2001:db8::1]
  hosts /etc/hosts
  rewrite name foo bar
  log
}
consul.local:53 {
  forward . 10.0.0.1
}`, resolv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 1053 || c.Kubeconfig != "/etc/coredns/kubeconfig" || c.Context != "admin" || c.TTL != 5 || c.Health != "" ||
		!reflect.DeepEqual(c.Forward, []string{"1.1.1.1:53", "9.9.9.9:5353", "[2001:db8::1]:53"}) ||
		!reflect.DeepEqual(c.Ignored, []string{"server block consul.local:53", "rewrite", "log"}) ||
		c.Hosts == nil || !reflect.DeepEqual(c.Hosts.Zones, []string{"cluster.local."}) {
		t.Errorf("got %+v", c)
	}
	for _, bad := range []string{
		"",
		".:53 {\n kubernetes\n}",
		".:53 {\n forward . tls://1.1.1.1\n}",
		".:53 {\n forward . /missing\n}",
		".:53 {\n health {\n",
		".:53 {\n kubernetes cluster.local {\n ttl 99999\n }\n}",
		".:x {\n}",
	} {
		if _, err := Parse(bad, resolv); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
