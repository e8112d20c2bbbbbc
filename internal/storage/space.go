package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultQuotaBackendBytes is etcd's own default quota, 2 GiB.
const DefaultQuotaBackendBytes = 2 << 30

// NoSpace reports etcd's NOSPACE alarm, as /readyz shows it: nil when no
// member has raised it.
func NoSpace(ctx context.Context, cli *clientv3.Client) error {
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		return wrapEtcd(err)
	}
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			return fmt.Errorf("alarm NOSPACE on member %x: %w (writes are refused until objects are deleted)", a.MemberID, ErrNoSpace)
		}
	}
	return nil
}

// RunMaintenance keeps the embedded member's database file in shape until
// ctx ends, checking every interval: it defragments when at least half of
// a file of an eighth of the quota or more is free (what compaction left),
// and when the NOSPACE alarm is up it compacts all history, defragments,
// and disarms the alarm once the live data fits again (below 90% of the
// quota), so that writes resume by themselves after deletes.
func (e *Embedded) RunMaintenance(ctx context.Context, cli *clientv3.Client, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	full := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stillFull, err := e.maintain(ctx, cli)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("etcd maintenance", "err", err)
			}
			continue
		}
		if stillFull && !full {
			slog.Error("etcd's database is full: writes are refused until objects are deleted", "quota", e.quota)
		}
		full = stillFull
	}
}

// maintain runs one round of RunMaintenance and says whether the alarm is
// still up.
func (e *Embedded) maintain(ctx context.Context, cli *clientv3.Client) (bool, error) {
	st, err := cli.Status(ctx, e.ClientURL)
	if err != nil {
		return false, fmt.Errorf("status: %w", err)
	}
	alarmed := errors.Is(NoSpace(ctx, cli), ErrNoSpace)
	// etcd refuses writes while its file, free pages included, is past the
	// quota: the live data must fit well below it before the alarm goes.
	fits := func(st *clientv3.StatusResponse) bool { return st.DbSizeInUse < e.quota/10*9 }
	switch {
	case alarmed:
		// The history is what a full database gives up first.
		_, err := cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical())
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return true, fmt.Errorf("compact to revision %d: %w", st.Header.Revision, err)
		}
		if st, err = cli.Status(ctx, e.ClientURL); err != nil {
			return true, fmt.Errorf("status: %w", err)
		}
		if !fits(st) {
			return true, nil
		}
	case st.DbSize < e.quota/8 || st.DbSize-st.DbSizeInUse < st.DbSize/2:
		return false, nil
	}
	if _, err := cli.Defragment(ctx, e.ClientURL); err != nil {
		return alarmed, fmt.Errorf("defragment: %w", err)
	}
	after, err := cli.Status(ctx, e.ClientURL)
	if err != nil {
		return alarmed, fmt.Errorf("status: %w", err)
	}
	slog.Info("defragmented etcd", "before", st.DbSize, "after", after.DbSize, "inUse", after.DbSizeInUse)
	if !alarmed {
		return false, nil
	}
	if after.DbSize >= e.quota/10*9 {
		return true, nil
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: st.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		return true, fmt.Errorf("disarm NOSPACE: %w", err)
	}
	slog.Info("etcd has space again: NOSPACE alarm disarmed, writes resume", "quota", e.quota, "size", after.DbSize)
	return false, nil
}
