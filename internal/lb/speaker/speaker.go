// Package speaker is MetalLB's speaker in layer 2 mode for one node: it
// watches LoadBalancer Services, their EndpointSlices, the Nodes and
// MetalLB's IPAddressPools and L2Advertisements, decides for each
// Service's load balancer IPs which node announces them (every speaker
// decides alike, so exactly one node does), and makes its own node answer
// ARP and NDP for the IPs it won (internal/lb/layer2). It tells the
// Service so with a nodeAssigned event, as MetalLB's speaker does, and
// records where it announces in a ServiceL2Status.
//
// MetalLB's speakers learn which of them are alive through memberlist;
// here a node's speaker counts as alive while its Node is Ready, so an
// announcing node that stops reporting hands its IPs over once the node
// lifecycle controller marks it NotReady (--node-monitor-grace-period).
package speaker

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/internal/events"
	"github.com/svcnet/svcnet/internal/informer"
	"github.com/svcnet/svcnet/internal/lb/layer2"
	"github.com/svcnet/svcnet/internal/lb/metallb"
)

// Component is the event source of the speaker, MetalLB's.
const Component = "metallb-speaker"

// Protocol is the announcement protocol, as MetalLB names it in events.
const Protocol = "layer2"

// Config configures a speaker.
type Config struct {
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// NodeName is the node the speaker runs on.
	NodeName string
	// NetNS is the path of the node's network namespace (empty: the
	// process's own), where it answers.
	NetNS  string
	Logger *slog.Logger
}

// speaker holds what one sync needs.
type speaker struct {
	cfg       Config
	log       *slog.Logger
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	nodes     corelisters.NodeLister
	metallb   *metallb.Config
	announcer *layer2.Announcer
	recorder  record.EventRecorder
	status    *l2Status
	// announced are the Services this node announces, with their choice.
	announced map[string]Choice
	// failed are the Services whose interfaces this node lacks.
	failed map[string]bool
}

// Run runs the speaker until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", Component)
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	mlb, err := metallb.New(cfg.Dynamic)
	if err != nil {
		return err
	}
	s := &speaker{
		cfg:       cfg,
		log:       log,
		services:  factory.Core().V1().Services().Lister(),
		slices:    factory.Discovery().V1().EndpointSlices().Lister(),
		nodes:     factory.Core().V1().Nodes().Lister(),
		metallb:   mlb,
		announcer: layer2.New(layer2.Config{NetNS: cfg.NetNS, Logger: log}),
		recorder:  events.NewRecorder(ctx, cfg.Client, Component),
		status:    newL2Status(cfg.Dynamic, cfg.NodeName, log),
		announced: map[string]Choice{},
		failed:    map[string]bool{},
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() }}
	synced, err := informer.Register(
		informer.Handler{Informer: factory.Core().V1().Services().Informer(), Handler: h},
		informer.Handler{Informer: factory.Discovery().V1().EndpointSlices().Informer(), Handler: h},
		informer.Handler{Informer: factory.Core().V1().Nodes().Informer(), Handler: h},
	)
	if err != nil {
		return err
	}
	if err := mlb.AddEventHandler(h); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if mlb.WaitServed(ctx, cfg.Client.Discovery()) != nil {
		return nil // stopped first
	}
	mlb.Start(ctx.Done())
	defer mlb.Shutdown()
	wg.Go(func() { s.announcer.Run(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), append(synced, mlb.HasSynced)...) {
		return nil // stopped first
	}
	log.Info("speaker running", "node", cfg.NodeName, "protocol", Protocol)
	for {
		s.sync(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// sync decides every Service afresh and makes the node answer for the
// IPs it won.
func (s *speaker) sync(ctx context.Context) {
	services, err := s.services.List(labels.Everything())
	if err != nil {
		s.log.Warn("list services", "err", err)
		return
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		s.log.Warn("list nodes", "err", err)
		return
	}
	w := World{Nodes: nodes, Pools: s.metallb.Pools(), L2Ads: s.metallb.L2Advertisements()}
	local := s.announcer.Interfaces()
	now := map[string]Choice{}
	var ads []layer2.Advertisement
	for _, svc := range services {
		key := svc.Namespace + "/" + svc.Name
		w.Slices = s.endpointSlices(svc)
		c := choose(svc, w, s.cfg.NodeName)
		if prev, ok := s.announced[key]; ok && c.Reason == "" && !slices.Equal(prev.IPs, c.IPs) {
			s.withdraw(key, prev, "loadBalancerIPChanged")
			delete(s.announced, key)
		}
		if c.Reason != "" {
			if prev, ok := s.announced[key]; ok {
				s.withdraw(key, prev, c.Reason)
			}
			delete(s.failed, key)
			continue
		}
		if len(c.Interfaces) > 0 && !slices.ContainsFunc(c.Interfaces, func(n string) bool { return slices.Contains(local, n) }) {
			if !s.failed[key] {
				s.failed[key] = true
				for _, ip := range c.IPs {
					s.recorder.Eventf(svc, corev1.EventTypeWarning, "announceFailed",
						"the interfaces specified by LB IP %q doesn't exist in assigned node %q with protocol %q", ip.String(), s.cfg.NodeName, Protocol)
				}
			}
			if prev, ok := s.announced[key]; ok {
				s.withdraw(key, prev, "interfacesNotFound")
			}
			continue
		}
		delete(s.failed, key)
		now[key] = c
		for _, ip := range c.IPs {
			ads = append(ads, layer2.Advertisement{IP: ip, Interfaces: c.Interfaces})
		}
		if _, ok := s.announced[key]; !ok {
			s.log.Info("service has IP, announcing", "service", key, "ips", c.IPs, "protocol", Protocol)
			s.recorder.Eventf(svc, corev1.EventTypeNormal, "nodeAssigned", "announcing from node %q with protocol %q", s.cfg.NodeName, Protocol)
		}
	}
	for key, prev := range s.announced {
		if _, ok := now[key]; !ok && !slices.ContainsFunc(services, func(svc *corev1.Service) bool { return svc.Namespace+"/"+svc.Name == key }) {
			s.withdraw(key, prev, "serviceDeleted")
		}
	}
	s.announced = now
	s.announcer.Set(merge(ads))
	owner, _ := s.nodes.Get(s.cfg.NodeName)
	s.status.sync(ctx, now, owner)
}

// withdraw logs that this node stops announcing a Service.
func (s *speaker) withdraw(key string, c Choice, reason string) {
	s.log.Info("withdrawing service announcement", "service", key, "ips", c.IPs, "reason", reason)
}

// endpointSlices are svc's EndpointSlices.
func (s *speaker) endpointSlices(svc *corev1.Service) []*discoveryv1.EndpointSlice {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	out, err := s.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil
	}
	return out
}

// merge makes one advertisement per IP (Services may share one): on
// the union of their interfaces, every interface if one of them has no
// limit.
func merge(ads []layer2.Advertisement) []layer2.Advertisement {
	byIP := map[netip.Addr]int{}
	var out []layer2.Advertisement
	for _, ad := range ads {
		i, ok := byIP[ad.IP]
		if !ok {
			byIP[ad.IP] = len(out)
			out = append(out, layer2.Advertisement{IP: ad.IP, Interfaces: slices.Clone(ad.Interfaces)})
			continue
		}
		switch {
		case len(out[i].Interfaces) == 0:
		case len(ad.Interfaces) == 0:
			out[i].Interfaces = nil
		default:
			for _, n := range ad.Interfaces {
				if !slices.Contains(out[i].Interfaces, n) {
					out[i].Interfaces = append(out[i].Interfaces, n)
				}
			}
			slices.Sort(out[i].Interfaces)
		}
	}
	return out
}
