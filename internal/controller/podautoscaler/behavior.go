package podautoscaler

import (
	"math"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// recommendation is one sync's unstabilized replica count.
type recommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is one change of the target's replicas.
type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// history is what the controller remembers of each autoscaler between
// syncs, as upstream's: recent recommendations (the stabilization
// windows) and recent scale events (the behavior policies' periods).
type history struct {
	mu              sync.Mutex
	recommendations map[string][]recommendation
	scaleUps        map[string][]scaleEvent
	scaleDowns      map[string][]scaleEvent
}

func newHistory() *history {
	return &history{recommendations: map[string][]recommendation{},
		scaleUps: map[string][]scaleEvent{}, scaleDowns: map[string][]scaleEvent{}}
}

func (h *history) forget(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.recommendations, key)
	delete(h.scaleUps, key)
	delete(h.scaleDowns, key)
}

// recordInitial remembers the current count as a first recommendation.
func (h *history) recordInitial(key string, current int32, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.recommendations[key] == nil {
		h.recommendations[key] = []recommendation{{current, now}}
	}
}

// stabilize is upstream's stabilizeRecommendation, without behavior: the
// highest recommendation within the downscale window, recording desired
// in place of one that has left it.
func (h *history) stabilize(key string, desired int32, window time.Duration, now time.Time) int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := desired
	cutoff := now.Add(-window)
	replaced := false
	recs := h.recommendations[key]
	for i, r := range recs {
		if r.at.Before(cutoff) {
			if !replaced {
				recs[i], replaced = recommendation{desired, now}, true
			}
			continue
		}
		out = max(out, r.replicas)
	}
	if !replaced {
		h.recommendations[key] = append(recs, recommendation{desired, now})
	}
	return out
}

// normalization is what the behavior-aware normalization needs.
type normalization struct {
	key                       string
	up, down                  *autoscalingv2.HPAScalingRules
	min, max, current, desire int32
}

// stabilizeWithBehavior is upstream's stabilizeRecommendationWithBehaviors:
// the recommendation is held between the lowest within the scale-up
// window and the highest within the scale-down window.
func (h *history) stabilizeWithBehavior(n normalization, now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	upLimit, downLimit := n.desire, n.desire
	upCutoff := now.Add(-time.Duration(*n.up.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*n.down.StabilizationWindowSeconds) * time.Second)
	old := -1
	for i, r := range h.recommendations[n.key] {
		if r.at.After(upCutoff) {
			upLimit = min(upLimit, r.replicas)
		}
		if r.at.After(downCutoff) {
			downLimit = max(downLimit, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old = i
		}
	}
	out := max(n.current, upLimit)
	out = min(out, downLimit)
	if old >= 0 {
		h.recommendations[n.key][old] = recommendation{n.desire, now}
	} else {
		h.recommendations[n.key] = append(h.recommendations[n.key], recommendation{n.desire, now})
	}
	if n.desire >= n.current {
		return out, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return out, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// limitWithBehavior is upstream's convertDesiredReplicasWithBehaviorRate:
// the policies bound the change against the count at the start of each
// policy's period.
func (h *history) limitWithBehavior(n normalization, now time.Time) (int32, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ups, downs := h.scaleUps[n.key], h.scaleDowns[n.key]
	switch {
	case n.desire > n.current:
		limit := max(scaleUpLimit(n.current, ups, downs, n.up, now), n.current)
		allowed, reason, msg := n.max, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if allowed > limit {
			allowed, reason, msg = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if n.desire > allowed {
			return allowed, reason, msg
		}
	case n.desire < n.current:
		limit := min(scaleDownLimit(n.current, ups, downs, n.down, now), n.current)
		allowed, reason, msg := n.min, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if allowed < limit {
			allowed, reason, msg = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if n.desire < allowed {
			return allowed, reason, msg
		}
	}
	return n.desire, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changeWithin sums the changes of the events within period seconds.
func changeWithin(period int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(period) * time.Second)
	var sum int32
	for _, e := range events {
		if e.at.After(cutoff) && !e.outdated {
			sum += e.change
		}
	}
	return sum
}

// scaleUpLimit is the most replicas the scale-up policies allow.
func scaleUpLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return policyLimit(current, ups, downs, rules, now, true)
}

// scaleDownLimit is the fewest replicas the scale-down policies allow.
func scaleDownLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	return policyLimit(current, ups, downs, rules, now, false)
}

// policyLimit is the bound the policies of one direction set, each
// counted from the replicas before the changes within its period: the
// widest of them (Max), or the narrowest (Min). Percent policies round a
// scale-up up and a scale-down down, as upstream's.
func policyLimit(current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time, up bool) int32 {
	if *rules.SelectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// widest is whether a is further in the scaling direction than b.
	widest := func(a, b int32) bool { return (a > b) == up }
	if *rules.SelectPolicy == autoscalingv2.MinChangePolicySelect {
		widest = func(a, b int32) bool { return (a < b) == up }
	}
	first, result := true, int32(0)
	for _, p := range rules.Policies {
		start := current - changeWithin(p.PeriodSeconds, ups, now) + changeWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case p.Type == autoscalingv2.PercentScalingPolicy && up:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		if first || widest(proposed, result) {
			first, result = false, proposed
		}
	}
	if first { // no policies: the start of the search, as upstream's
		if widest(math.MaxInt32, math.MinInt32) {
			return math.MinInt32
		}
		return math.MaxInt32
	}
	return result
}

// recordScale remembers a change of the target made under a behavior,
// reusing an event older than the rules' longest period.
func (h *history) recordScale(key string, b *autoscalingv2.HorizontalPodAutoscalerBehavior, from, to int32, now time.Time) {
	if b == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	events, rules, change := h.scaleUps, b.ScaleUp, to-from
	if to < from {
		events, rules, change = h.scaleDowns, b.ScaleDown, from-to
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	list := events[key]
	for i := range list {
		if list[i].at.Before(cutoff) {
			list[i].outdated = true
		}
	}
	for i := range list {
		if list[i].outdated {
			list[i] = scaleEvent{change: change, at: now}
			return
		}
	}
	events[key] = append(list, scaleEvent{change: change, at: now})
}

// limit is upstream's convertDesiredReplicasWithRules, without behavior:
// within the bounds and at most double (or 4) the current count.
func limit(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	allowed, reason, msg := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if up := max(2*current, 4); maxReplicas > up {
		allowed, reason, msg = up, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desired > allowed:
		return allowed, reason, msg
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}
