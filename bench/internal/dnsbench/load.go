package dnsbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// mixDescription says what mix makes.
const mixDescription = "40% A of a ClusterIP Service, 20% SRV _http._tcp of one, 20% A of a headless Service (3 endpoints), 20% A of an unknown Service (NXDOMAIN)"

// query is one question of the mix, packed once so that the clients spend
// as little of the machine as they can, and the answer's rcode it expects.
type query struct {
	msg   []byte
	rcode int
}

// mix returns n questions drawn as mixDescription says, from a fixed seed
// so that every server gets the same ones.
func (f *fixture) mix(n int) ([]query, error) {
	var byKind [3][]int
	for i := range f.o.Services {
		byKind[kindOf(i)] = append(byKind[kindOf(i)], i)
	}
	if len(byKind[clusterIP]) == 0 || len(byKind[headless]) == 0 {
		return nil, fmt.Errorf("%d Services are too few for the mix", f.o.Services)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(k kind) int { return byKind[k][rng.IntN(len(byKind[k]))] }
	qs := make([]query, n)
	for q := range qs {
		var name string
		qtype, rcode := dns.TypeA, dns.RcodeSuccess
		switch p := rng.IntN(10); {
		case p < 4:
			name = f.fqdn(pick(clusterIP))
		case p < 6:
			name, qtype = "_http._tcp."+f.fqdn(pick(clusterIP)), dns.TypeSRV
		case p < 8:
			name = f.fqdn(pick(headless))
		default:
			i := rng.IntN(f.o.Services)
			name, rcode = fmt.Sprintf("nosuch-%d.%s.svc.%s.", i, f.namespace(i), zone), dns.RcodeNameError
		}
		m := new(dns.Msg).SetQuestion(name, qtype)
		m.Id = 0
		b, err := m.Pack()
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
		qs[q] = query{msg: b, rcode: rcode}
	}
	return qs, nil
}

// Stats are one server's figures over all its rounds.
type Stats struct {
	Server string
	// Ready is from the server's start to its first right answer for the
	// last Service loaded.
	Ready time.Duration
	// Queries were answered, Lost were not within a second, Wrong were
	// answered with another rcode than expected.
	Queries, Lost, Wrong int
	// Elapsed is the measured time.
	Elapsed  time.Duration
	P50, P99 time.Duration

	latencies []time.Duration
}

// QPS is answered queries per second.
func (s *Stats) QPS() float64 { return float64(s.Queries) / s.Elapsed.Seconds() }

func (s *Stats) add(t *Stats) {
	s.Queries += t.Queries
	s.Lost += t.Lost
	s.Wrong += t.Wrong
	s.Elapsed += t.Elapsed
	s.latencies = append(s.latencies, t.latencies...)
}

// summarize computes the percentiles and drops the samples.
func (s *Stats) summarize() {
	slices.Sort(s.latencies)
	s.P50, s.P99 = percentile(s.latencies, 0.50), percentile(s.latencies, 0.99)
	s.latencies = nil
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[max(i, 0)]
}

// timeout is how long a client waits for an answer before it counts the
// query as lost.
const timeout = time.Second

// measure sends queries to addr from workers UDP clients for d, each
// client asking its next question when the answer to the last arrived.
func measure(ctx context.Context, addr string, queries []query, workers int, d time.Duration) (*Stats, error) {
	results := make([]*Stats, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			results[w], errs[w] = client(ctx, addr, queries, w*len(queries)/workers, end)
		})
	}
	wg.Wait()
	total := &Stats{Elapsed: time.Since(start)}
	for w, r := range results {
		if errs[w] != nil {
			return nil, errs[w]
		}
		r.Elapsed = 0
		total.add(r)
	}
	return total, nil
}

// client asks queries from the first on, round and round, until end.
func client(ctx context.Context, addr string, queries []query, first int, end time.Time) (*Stats, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	s := &Stats{latencies: make([]time.Duration, 0, 1<<14)}
	out := make([]byte, 512)
	in := make([]byte, 4096)
	var id uint16
	for k := first; ctx.Err() == nil; k++ {
		sent := time.Now()
		if !sent.Before(end) {
			return s, nil
		}
		q := queries[k%len(queries)]
		id++
		msg := append(out[:0], q.msg...)
		binary.BigEndian.PutUint16(msg, id)
		if _, err := conn.Write(msg); err != nil {
			return nil, fmt.Errorf("send to %s: %w", addr, err)
		}
		if err := conn.SetReadDeadline(sent.Add(timeout)); err != nil {
			return nil, err
		}
		for {
			n, err := conn.Read(in)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.Lost++
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read from %s: %w", addr, err)
			}
			if n < 12 || binary.BigEndian.Uint16(in) != id {
				continue // an answer to a question already counted as lost
			}
			s.latencies = append(s.latencies, time.Since(sent))
			s.Queries++
			if int(in[3]&0xf) != q.rcode {
				s.Wrong++
			}
			break
		}
	}
	return s, ctx.Err()
}
