package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a create found the key taken.
	ErrExists = errors.New("already exists")
	// ErrConflict: the stored revision is not the one the write expected.
	ErrConflict = errors.New("revision conflict")
	// ErrTooLarge: etcd refused the request as too large.
	ErrTooLarge = errors.New("etcdserver: request is too large")
	// ErrNoSpace: etcd's NOSPACE alarm is raised; it takes reads and
	// deletes only, until space is freed and the alarm disarmed.
	ErrNoSpace = errors.New("etcdserver: mvcc: database space exceeded")
)

// CompactedError says a requested revision has been compacted away.
type CompactedError struct{ Requested, Compacted int64 }

func (e *CompactedError) Error() string {
	return fmt.Sprintf("revision %d compacted (oldest kept %d)", e.Requested, e.Compacted)
}

// Extra adds conditions and operations to the transaction of a write, so
// that an object and the state derived from it (an allocation bitmap) commit
// together or not at all. A write whose extra conditions fail returns
// ErrExtraFailed; the caller re-reads and retries.
type Extra struct {
	If   []clientv3.Cmp
	Then []clientv3.Op
}

// ErrExtraFailed: the object's own condition held but an Extra condition did not.
var ErrExtraFailed = errors.New("transaction condition on related state failed")

// Codec turns objects into stored bytes and back.
type Codec interface {
	Encode(obj runtime.Object) ([]byte, error)
	Decode(data []byte) (runtime.Object, error)
}

// Store reads and writes objects under keys in etcd.
type Store struct {
	Client     *clientv3.Client
	codec      Codec
	transforms *transforms // nil: values are stored as encoded
}

// New returns a Store over an etcd client.
func New(client *clientv3.Client, codec Codec) *Store {
	return &Store{Client: client, codec: codec}
}

func (s *Store) decode(kv *mvccpb.KeyValue, rev int64) (runtime.Object, error) {
	data, err := s.fromStorage(kv)
	if err != nil {
		return nil, err
	}
	return s.decodeData(kv, data, rev)
}

// decodeData decodes kv's value, data as fromStorage read it.
func (s *Store) decodeData(kv *mvccpb.KeyValue, data []byte, rev int64) (runtime.Object, error) {
	obj, err := s.codec.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

func setRV(obj runtime.Object, rev int64) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// encode stores the object without its resourceVersion: the etcd revision is
// the resourceVersion. The bytes are transformed for key.
func (s *Store) encode(key string, obj runtime.Object) ([]byte, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := a.GetResourceVersion()
	a.SetResourceVersion("")
	data, err := s.codec.Encode(obj)
	a.SetResourceVersion(rv)
	if err != nil {
		return nil, err
	}
	return s.toStorage(key, data)
}

func wrapEtcd(err error) error {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return ErrTooLarge
	}
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
		return ErrNoSpace
	}
	return fmt.Errorf("etcd: %w", err)
}

// Get reads one object.
func (s *Store) Get(ctx context.Context, key string) (runtime.Object, error) {
	resp, err := s.Client.Get(ctx, key)
	if err != nil {
		return nil, wrapEtcd(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotFound
	}
	return s.decode(resp.Kvs[0], resp.Kvs[0].ModRevision)
}

// Create stores obj under key if the key is free. The returned object
// carries its new resourceVersion.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object, extra Extra) (runtime.Object, error) {
	data, err := s.encode(key, obj)
	if err != nil {
		return nil, err
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, extra.If...)
	ops := append([]clientv3.Op{clientv3.OpPut(key, string(data))}, extra.Then...)
	resp, err := s.Client.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, wrapEtcd(err)
	}
	if !resp.Succeeded {
		if len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
			return nil, ErrExists
		}
		return nil, ErrExtraFailed
	}
	out := obj.DeepCopyObject()
	return out, setRV(out, resp.Header.Revision)
}

// Update replaces the object at key if its mod revision is still rev.
func (s *Store) Update(ctx context.Context, key string, obj runtime.Object, rev int64, extra Extra) (runtime.Object, error) {
	data, err := s.encode(key, obj)
	if err != nil {
		return nil, err
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, extra.If...)
	ops := append([]clientv3.Op{clientv3.OpPut(key, string(data))}, extra.Then...)
	resp, err := s.Client.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, wrapEtcd(err)
	}
	if !resp.Succeeded {
		return nil, s.whyFailed(resp, rev)
	}
	s.forget(key)
	out := obj.DeepCopyObject()
	return out, setRV(out, resp.Header.Revision)
}

// Delete removes the object at key if its mod revision is still rev. The
// returned object is the deleted one, with the deletion's revision.
func (s *Store) Delete(ctx context.Context, key string, rev int64, extra Extra) (runtime.Object, error) {
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, extra.If...)
	ops := append([]clientv3.Op{clientv3.OpDelete(key, clientv3.WithPrevKV())}, extra.Then...)
	resp, err := s.Client.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, wrapEtcd(err)
	}
	if !resp.Succeeded {
		return nil, s.whyFailed(resp, rev)
	}
	s.forget(key)
	prev := resp.Responses[0].GetResponseDeleteRange().PrevKvs
	if len(prev) == 0 {
		return nil, ErrNotFound
	}
	return s.decode(prev[0], resp.Header.Revision)
}

func (s *Store) whyFailed(resp *clientv3.TxnResponse, rev int64) error {
	kvs := resp.Responses[0].GetResponseRange().Kvs
	switch {
	case len(kvs) == 0:
		return ErrNotFound
	case kvs[0].ModRevision != rev:
		return ErrConflict
	default:
		return ErrExtraFailed
	}
}

// ListOptions select a page of a prefix.
type ListOptions struct {
	// Revision reads at that revision; 0 reads the latest.
	Revision int64
	// Start is the first key to return (from a continue token); empty starts
	// at the prefix.
	Start string
	// Limit caps the returned items; 0 means all.
	Limit int64
	// Filter keeps the objects it returns true for; nil keeps all.
	Filter func(runtime.Object) bool
	// Prefilter, if set, sees each stored document (decrypted) before it
	// is decoded, and may refuse those that Filter would refuse, sparing
	// their decoding; it must keep every one Filter could keep.
	Prefilter func(data []byte) bool
	// Decode, if set, decodes each document in place of the codec: a
	// list that needs less than the whole object decodes less.
	Decode func(data []byte) (runtime.Object, error)
}

// ListResult is one page of a list.
type ListResult struct {
	Items    []runtime.Object
	Revision int64
	// Next is the key to continue from; empty when the list is complete.
	Next string
	// Remaining counts the keys after this page when no filter applied.
	Remaining *int64
}

// List reads the objects under prefix, consistently at one revision.
func (s *Store) List(ctx context.Context, prefix string, o ListOptions) (*ListResult, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	start := prefix
	if o.Start != "" {
		start = o.Start
	}
	res := &ListResult{Revision: o.Revision}
	batch := o.Limit
	if o.Filter != nil && batch > 0 && batch < 100 {
		batch = 100
	}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end)}
		if res.Revision > 0 {
			opts = append(opts, clientv3.WithRev(res.Revision))
		}
		if batch > 0 {
			opts = append(opts, clientv3.WithLimit(batch+1))
		}
		resp, err := s.Client.Get(ctx, start, opts...)
		if err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return nil, &CompactedError{Requested: res.Revision}
			}
			return nil, wrapEtcd(err)
		}
		if res.Revision == 0 {
			res.Revision = resp.Header.Revision
		}
		kvs := resp.Kvs
		more := resp.More
		if batch > 0 && int64(len(kvs)) > batch {
			kvs, more = kvs[:batch], true
		}
		for i, kv := range kvs {
			data, err := s.fromStorage(kv)
			if err != nil {
				return nil, inList(err)
			}
			if o.Prefilter != nil && !o.Prefilter(data) {
				continue
			}
			var obj runtime.Object
			if o.Decode != nil {
				if obj, err = o.Decode(data); err == nil {
					err = setRV(obj, kv.ModRevision)
				}
			} else {
				obj, err = s.decodeData(kv, data, kv.ModRevision)
			}
			if err != nil {
				return nil, inList(err)
			}
			if o.Filter != nil && !o.Filter(obj) {
				continue
			}
			res.Items = append(res.Items, obj)
			if o.Limit > 0 && int64(len(res.Items)) == o.Limit {
				if i < len(kvs)-1 || more {
					res.Next = string(kv.Key) + "\x00"
					if o.Filter == nil {
						n := resp.Count - int64(i) - 1
						res.Remaining = &n
					}
				}
				return res, nil
			}
		}
		if !more {
			return res, nil
		}
		start = string(kvs[len(kvs)-1].Key) + "\x00"
	}
}

// Revision returns etcd's current revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.Client.Get(ctx, "/registry/health-revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, wrapEtcd(err)
	}
	return resp.Header.Revision, nil
}

// Event is one change under a watched prefix. Exactly one of Object (with
// Type), Err or Progress is set.
type Event struct {
	Type     watch.EventType
	Object   runtime.Object // the new object; for DELETED the last state
	Prev     runtime.Object // the state before, when there was one
	Revision int64
	// Progress reports that every change up to Revision has been sent.
	Progress bool
	Err      error
}

// Watch streams the changes under prefix after revision from-1 (so from is the
// first revision delivered). The channel closes when ctx ends or after an
// Err event.
func (s *Store) Watch(ctx context.Context, prefix string, from int64) <-chan Event {
	out := make(chan Event, 100)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		defer cancel()
		wch := s.Client.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from),
			clientv3.WithPrevKV(), clientv3.WithProgressNotify())
		send := func(e Event) bool {
			select {
			case out <- e:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for resp := range wch {
			if resp.CompactRevision != 0 {
				send(Event{Err: &CompactedError{Requested: from, Compacted: resp.CompactRevision}})
				return
			}
			if err := resp.Err(); err != nil {
				send(Event{Err: wrapEtcd(err)})
				return
			}
			if resp.IsProgressNotify() {
				if !send(Event{Progress: true, Revision: resp.Header.Revision}) {
					return
				}
				continue
			}
			for _, ev := range resp.Events {
				e, err := s.event(ev)
				if err != nil {
					e = Event{Err: err}
				}
				if !send(e) || e.Err != nil {
					return
				}
			}
		}
	}()
	return out
}

func (s *Store) event(ev *clientv3.Event) (Event, error) {
	e := Event{Revision: ev.Kv.ModRevision}
	var err error
	if ev.PrevKv != nil {
		if e.Prev, err = s.decode(ev.PrevKv, ev.PrevKv.ModRevision); err != nil {
			return e, err
		}
	}
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		e.Type = watch.Deleted
		if e.Prev == nil {
			return e, fmt.Errorf("delete of %s without its previous value", ev.Kv.Key)
		}
		e.Object = e.Prev.DeepCopyObject()
		err = setRV(e.Object, ev.Kv.ModRevision)
	case ev.IsCreate():
		e.Type = watch.Added
		e.Object, err = s.decode(ev.Kv, ev.Kv.ModRevision)
	default:
		e.Type = watch.Modified
		e.Object, err = s.decode(ev.Kv, ev.Kv.ModRevision)
	}
	return e, err
}
