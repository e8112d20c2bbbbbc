// Package apibench measures the API server's create, get, list and watch
// against raw etcd operations on the same data in the same run.
package apibench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/svcnet/svcnet/bench/internal/benchenv"
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// Options size a run.
type Options struct {
	N       int // objects
	Workers int // concurrent clients
}

// Stat is one measured operation.
type Stat struct {
	Name     string
	Ops      int
	Elapsed  time.Duration
	P50, P99 time.Duration
}

// Rate is operations per second.
func (s Stat) Rate() float64 { return float64(s.Ops) / s.Elapsed.Seconds() }

// Result pairs each svcnet operation with its etcd baseline.
type Result struct {
	N, Workers int
	Pairs      [][2]Stat // svcnet, etcd
}

// Print writes the result as a table with svcnet/etcd ratios.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "%d ConfigMaps, %d workers\n", r.N, r.Workers)
	fmt.Fprintf(w, "%-8s %12s %10s %10s | %-12s %12s %10s %10s | %8s\n",
		"svcnet", "ops/s", "p50", "p99", "etcd", "ops/s", "p50", "p99", "ratio")
	for _, p := range r.Pairs {
		s, e := p[0], p[1]
		fmt.Fprintf(w, "%-8s %12.0f %10s %10s | %-12s %12.0f %10s %10s | %8.3f\n",
			s.Name, s.Rate(), round(s.P50), round(s.P99), e.Name, e.Rate(), round(e.P50), round(e.P99), s.Rate()/e.Rate())
	}
}

func round(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(10 * time.Microsecond).String()
}

// Run starts an API server on embedded etcd in a temporary dir and measures.
func Run(ctx context.Context, o Options) (*Result, error) {
	srv, err := benchenv.StartServer(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	cs := srv.Client
	// The baseline's client is the API server's, TLS included.
	ec, err := storage.Connect(srv.EtcdEndpoints, srv.EtcdTLS)
	if err != nil {
		return nil, err
	}
	defer ec.Close()

	res := &Result{N: o.N, Workers: o.Workers}
	cms := cs.CoreV1().ConfigMaps("default")
	obj := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Labels: map[string]string{"bench": "yes"}},
			Data: map[string]string{"payload": strings.Repeat("x", 256)}}
	}
	// The etcd baseline writes the same document svcnet stores.
	payload, err := registry.JSONCodec{}.Encode(obj(0))
	if err != nil {
		return nil, err
	}
	ekey := func(i int) string { return fmt.Sprintf("/bench/configmaps/default/cm-%06d", i) }

	create := measure("create", o, func(i int) error {
		_, err := cms.Create(ctx, obj(i), metav1.CreateOptions{})
		return err
	})
	put := measure("put", o, func(i int) error {
		_, err := ec.Put(ctx, ekey(i), string(payload))
		return err
	})
	res.Pairs = append(res.Pairs, [2]Stat{create.stat, put.stat})

	get := measure("get", o, func(i int) error {
		_, err := cms.Get(ctx, fmt.Sprintf("cm-%06d", i), metav1.GetOptions{})
		return err
	})
	eget := measure("get", o, func(i int) error {
		_, err := ec.Get(ctx, ekey(i))
		return err
	})
	res.Pairs = append(res.Pairs, [2]Stat{get.stat, eget.stat})

	// A full list, paged by 500 as kubectl does, repeated a few times.
	const lists = 5
	list := measure("list", Options{N: lists, Workers: 1}, func(int) error {
		cont := ""
		for {
			l, err := cms.List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				return err
			}
			if cont = l.Continue; cont == "" {
				return nil
			}
		}
	})
	erange := measure("range", Options{N: lists, Workers: 1}, func(int) error {
		start, end := "/bench/configmaps/", clientv3.GetPrefixRangeEnd("/bench/configmaps/")
		for {
			r, err := ec.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(500))
			if err != nil {
				return err
			}
			if !r.More {
				return nil
			}
			start = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
		}
	})
	list.stat.Ops, erange.stat.Ops = lists*o.N, lists*o.N // objects per second
	res.Pairs = append(res.Pairs, [2]Stat{list.stat, erange.stat})

	w, err := watchUpdates(ctx, o, cms)
	if err != nil {
		return nil, err
	}
	ew, err := watchPuts(ctx, o, ec, ekey, string(payload))
	if err != nil {
		return nil, err
	}
	res.Pairs = append(res.Pairs, [2]Stat{w, ew})
	for _, m := range []measured{create, put, get, eget, list, erange} {
		if m.err != nil {
			return nil, fmt.Errorf("%s: %w", m.stat.Name, m.err)
		}
	}
	return res, nil
}

type measured struct {
	stat Stat
	err  error
}

// measure runs op for i in [0,N) over Workers goroutines and records each
// call's latency.
func measure(name string, o Options, op func(i int) error) measured {
	lat := make([]time.Duration, o.N)
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= o.N {
					return
				}
				t := time.Now()
				if err := op(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	m := measured{stat: Stat{Name: name, Ops: o.N, Elapsed: time.Since(start)}}
	m.stat.P50, m.stat.P99 = percentiles(lat)
	if e, ok := firstErr.Load().(error); ok {
		m.err = e
	}
	return m
}

func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0, 0
	}
	return s[len(s)/2], s[len(s)*99/100]
}

// watchStat measures change delivery: change(i) is called for every i over
// the workers, each marking its send time; the events channel reports the
// index of each delivered change. Latency is send-to-delivery.
func watchStat(ctx context.Context, name string, o Options, events <-chan int, change func(i int) error) (Stat, error) {
	sent := make([]atomic.Int64, o.N)
	lat := make([]time.Duration, o.N)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		for got := 0; got < o.N; got++ {
			select {
			case i, ok := <-events:
				if !ok {
					done <- fmt.Errorf("%s: watch ended after %d events", name, got)
					return
				}
				lat[i] = time.Duration(time.Now().UnixNano() - sent[i].Load())
			case <-time.After(60 * time.Second):
				done <- fmt.Errorf("%s: no event for 60s after %d", name, got)
				return
			case <-ctx.Done():
				done <- ctx.Err()
				return
			}
		}
		done <- nil
	}()
	m := measure(name, o, func(i int) error {
		sent[i].Store(time.Now().UnixNano())
		return change(i)
	})
	if m.err != nil {
		return Stat{}, m.err
	}
	if err := <-done; err != nil {
		return Stat{}, err
	}
	st := Stat{Name: name, Ops: o.N, Elapsed: time.Since(start)}
	st.P50, st.P99 = percentiles(lat)
	return st, nil
}

// indexOf parses the number at the end of "cm-000123".
func indexOf(name string) int {
	n := 0
	for _, c := range name[strings.LastIndexByte(name, '-')+1:] {
		n = n*10 + int(c-'0')
	}
	return n
}

// watchUpdates patches every ConfigMap once while a watch runs.
func watchUpdates(ctx context.Context, o Options, cms corev1client.ConfigMapInterface) (Stat, error) {
	l, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return Stat{}, err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		return Stat{}, err
	}
	defer w.Stop()
	events := make(chan int, o.N)
	go func() {
		defer close(events)
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Modified {
				events <- indexOf(cm.Name)
			}
		}
	}()
	return watchStat(ctx, "watch", o, events, func(i int) error {
		_, err := cms.Patch(ctx, fmt.Sprintf("cm-%06d", i), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"bench":"1"}}}`), metav1.PatchOptions{})
		return err
	})
}

// watchPuts rewrites every etcd key once while an etcd watch runs.
func watchPuts(ctx context.Context, o Options, ec *clientv3.Client, key func(int) string, payload string) (Stat, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := ec.Watch(wctx, "/bench/configmaps/", clientv3.WithPrefix())
	events := make(chan int, o.N)
	go func() {
		defer close(events)
		for resp := range wch {
			for _, ev := range resp.Events {
				events <- indexOf(string(ev.Kv.Key))
			}
		}
	}()
	return watchStat(ctx, "watch", o, events, func(i int) error {
		_, err := ec.Put(ctx, key(i), payload+" ")
		return err
	})
}
