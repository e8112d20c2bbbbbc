package storage

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// RunCompactor compacts etcd's history every interval, keeping the changes
// of the last interval, as kube-apiserver does: each tick compacts to the
// revision seen at the previous tick. Watches and lists older than that get
// 410 Gone. It returns when ctx ends.
func (s *Store) RunCompactor(ctx context.Context, interval time.Duration) {
	var last int64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last > 0 {
			// Maintenance of a full member may have compacted further.
			if _, err := s.Client.Compact(ctx, last); err != nil && ctx.Err() == nil && !errors.Is(err, rpctypes.ErrCompacted) {
				slog.Warn("etcd compaction failed", "revision", last, "err", err)
			}
		}
		rev, err := s.Revision(ctx)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("etcd revision read failed", "err", err)
			}
			continue
		}
		last = rev
	}
}
