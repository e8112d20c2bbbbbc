package node

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcnet/svcnet/internal/dns/lookup"
)

// dnsResolve asks the cluster DNS, from the node's network (where cluster
// IPs are reachable, as from the node's pods), the question of the
// query's name and type, answering a lookup.Answer: the doctor's view of
// what the Service's names resolve to.
func (s *server) dnsResolve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, typ := q.Get("name"), q.Get("type")
	if _, ok := lookup.Types[typ]; !ok || name == "" {
		writeStatus(w, apierrors.NewBadRequest("give name and type (A, AAAA, SRV or CNAME)"))
		return
	}
	server := net.JoinHostPort(s.agent.cfg.ClusterDNS, "53")
	a, err := lookup.Ask(r.Context(), s.agent.net.Dialer().DialContext, server, name, typ)
	if err != nil {
		writeStatus(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(a); err != nil {
		slog.Debug("write /"+lookup.Path, "err", err)
	}
}
