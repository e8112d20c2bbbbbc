package routes

import (
	"strings"
	"sync"
)

// Merge is the table that serves what each of tables serves: the one
// proxy serves the Ingress controller's table and the Gateway API
// controller's. Listeners of the same name merge; within them, virtual
// hosts of the same name (and the same wildcard kind) join their routes,
// an earlier table's first; the first Default and DefaultCertificate a
// table sets win; certificates are tried in table order. A listener that
// only one table has is kept as it is.
func Merge(tables ...*Table) *Table {
	byName := map[string][]*Listener{}
	for _, t := range tables {
		if t == nil {
			continue
		}
		for name, l := range t.Listeners {
			byName[name] = append(byName[name], l)
		}
	}
	out := &Table{Listeners: make(map[string]*Listener, len(byName))}
	for name, ls := range byName {
		if len(ls) == 1 {
			out.Listeners[name] = ls[0]
		} else {
			out.Listeners[name] = mergeListeners(ls)
		}
	}
	return out
}

// mergeListeners joins listeners; each host keeps its wildcard kind as
// the host's own SuffixWildcard.
func mergeListeners(ls []*Listener) *Listener {
	type hostKey struct {
		name   string
		suffix bool
	}
	out := &Listener{}
	hosts := map[hostKey]*VirtualHost{}
	for _, l := range ls {
		for _, vh := range l.Hosts {
			k := hostKey{vh.Hostname, strings.HasPrefix(vh.Hostname, "*.") && (vh.SuffixWildcard || l.SuffixWildcards)}
			m := hosts[k]
			if m == nil {
				m = &VirtualHost{Hostname: vh.Hostname, SuffixWildcard: k.suffix}
				hosts[k] = m
				out.Hosts = append(out.Hosts, m)
			}
			m.Routes = append(m.Routes, vh.Routes...)
		}
		if out.Default == nil {
			out.Default = l.Default
		}
		if out.DefaultCertificate == nil {
			out.DefaultCertificate = l.DefaultCertificate
		}
		out.Certificates = append(out.Certificates, l.Certificates...)
	}
	return out
}

// Sources publishes the Merge of the latest tables of several sources
// (the Ingress controller, the Gateway API controller), each of which
// swaps its own tables in through the function Swap gives it.
type Sources struct {
	mu      sync.Mutex
	tables  []*Table
	publish func(*Table)
}

// NewSources returns n sources whose merged table goes to publish (a
// proxy's Swap). Until a source has given a table it serves nothing.
func NewSources(n int, publish func(*Table)) *Sources {
	return &Sources{tables: make([]*Table, n), publish: publish}
}

// Swap is source i's Swap: its table replaces the one it gave before,
// and the merge of all is published.
func (s *Sources) Swap(i int) func(*Table) {
	return func(t *Table) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tables[i] = t
		s.publish(Merge(s.tables...))
	}
}
