package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/dns/lookup"
)

// The cluster DNS is asked each record the Service should have: the same
// answers are said in the DNSNames finding, others are DNSMismatch, and a
// DNS that cannot be asked is DNSUnanswered.
func TestDNSAnswers(t *testing.T) {
	labels := map[string]string{"app": "web"}
	client := fake.NewClientset(service("web", labels), pod("default", "web-1", "10.244.0.5", labels),
		slice("web", "http", 80, endpoint{pod: "web-1", ip: "10.244.0.5", node: "node-a"}))
	diagnose := func(answers map[string][]string, err error) *Report {
		t.Helper()
		r, derr := Diagnose(context.Background(), client, "default", "web", Options{Resolver: func(_ context.Context, name, typ string) (lookup.Answer, error) {
			if err != nil {
				return lookup.Answer{}, err
			}
			a := lookup.Answer{Server: "10.96.0.10:53", Rcode: "NOERROR", Records: answers[typ+" "+name]}
			if a.Records == nil {
				a.Rcode, a.Records = "NXDOMAIN", []string{}
			}
			return a, nil
		}})
		if derr != nil {
			t.Fatal(derr)
		}
		return r
	}
	find := func(r *Report, code Code) *Finding {
		for i := range r.Findings {
			if r.Findings[i].Code == code {
				return &r.Findings[i]
			}
		}
		return nil
	}
	right := map[string][]string{
		"A web.default.svc.cluster.local":              {"10.96.0.12"},
		"SRV _http._tcp.web.default.svc.cluster.local": {"80 web.default.svc.cluster.local"},
	}
	r := diagnose(right, nil)
	names := find(r, DNSNames)
	if !r.Healthy || find(r, DNSMismatch) != nil || names == nil {
		t.Fatalf("right answers: %+v", r.Findings)
	}
	if last := names.Evidence[len(names.Evidence)-1]; last.Name != "cluster DNS 10.96.0.10:53" || last.Value != "answers 2 records as above" {
		t.Errorf("DNSNames' last evidence %+v", last)
	}

	r = diagnose(map[string][]string{"SRV _http._tcp.web.default.svc.cluster.local": right["SRV _http._tcp.web.default.svc.cluster.local"]}, nil)
	m := find(r, DNSMismatch)
	if r.Healthy || m == nil || !strings.HasPrefix(m.Sentence, "The cluster DNS answers A web.default.svc.cluster.local with no records (NXDOMAIN), but the Service and its endpoints say 10.96.0.12") {
		t.Errorf("a missing A record: %+v", r.Findings)
	}
	if last := find(r, DNSNames).Evidence; strings.HasPrefix(last[len(last)-1].Name, "cluster DNS") {
		t.Errorf("DNSNames says the DNS answers as above after a mismatch: %+v", last)
	}

	r = diagnose(nil, errors.New("no node is Ready"))
	if u := find(r, DNSUnanswered); !r.Healthy || u == nil || !strings.Contains(u.Sentence, "no node is Ready") {
		t.Errorf("DNS not asked: %+v", r.Findings)
	}
}
