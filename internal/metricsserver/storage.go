package metricsserver

import (
	"time"
)

// series keeps a counter's last two points, from which a rate is taken.
type series struct{ prev, last *point }

// add stores p as the latest point, as metrics-server's storage: the
// former last point is kept when it is of the same run and older; a run
// that started within the resolution gets a point of no CPU at its start,
// so that a new container has a rate at its first scrape.
func (s series) add(p *point, resolution time.Duration) series {
	next := series{last: p}
	switch {
	case s.last != nil && s.last.start.Equal(p.start) && p.timestamp.After(s.last.timestamp) && p.cpu >= s.last.cpu:
		next.prev = s.last
	case !p.start.IsZero() && p.start.Before(p.timestamp) && p.timestamp.Sub(p.start) < resolution:
		next.prev = &point{start: p.start, timestamp: p.start}
	}
	return next
}

// rate is the CPU used per second between the two points, the window and
// the time of the last point; ok is false without two points.
func (s series) rate() (cores float64, window time.Duration, ok bool) {
	if s.prev == nil || s.last == nil {
		return 0, 0, false
	}
	window = s.last.timestamp.Sub(s.prev.timestamp)
	if window <= 0 {
		return 0, 0, false
	}
	return (s.last.cpu - s.prev.cpu) / window.Seconds(), window, true
}
