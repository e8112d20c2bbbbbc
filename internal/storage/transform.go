package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"k8s.io/apiserver/pkg/storage/value"
)

// Transformers choose how the value stored under an etcd key is
// transformed on its way to and from etcd (encryption at rest, see
// package encryption); nil means stored as encoded. The key is the
// authenticated data of the transformation, as upstream's: a value moved
// to another key does not read.
type Transformers func(key string) value.Transformer

// transforms is a store's value transformation.
type transforms struct {
	forKey Transformers
	// stale holds, by key, the latest mod revision whose value was read
	// through another transformer than the one that writes (an older key
	// or provider, or identity before encryption was on).
	stale sync.Map // string → int64
}

// SetTransformers makes the store transform values as t says: writes with
// each key's transformer, reads (get, list, watch, deletes) through it.
// It is set once, before the store is used.
func (s *Store) SetTransformers(t Transformers) {
	s.transforms = &transforms{forKey: t}
}

// TransformError says a stored value could not be transformed from or to
// storage: a value encrypted with a key the configuration does not have,
// or encrypted data where none is expected.
type TransformError struct {
	Key string
	Err error
	// list: the error is a list's, which names the key as upstream's does.
	list bool
}

func (e *TransformError) Error() string {
	if e.list {
		return fmt.Sprintf("unable to transform key %q: %v", e.Key, e.Err)
	}
	return e.Err.Error()
}

func (e *TransformError) Unwrap() error { return e.Err }

// inList marks err, when it is a TransformError, as a list's.
func inList(err error) error {
	var te *TransformError
	if errors.As(err, &te) {
		te.list = true
	}
	return err
}

func (s *Store) transformer(key string) value.Transformer {
	if s.transforms == nil || s.transforms.forKey == nil {
		return nil
	}
	return s.transforms.forKey(key)
}

// toStorage transforms the encoded object to be stored under key.
func (s *Store) toStorage(key string, data []byte) ([]byte, error) {
	t := s.transformer(key)
	if t == nil {
		return data, nil
	}
	out, err := t.TransformToStorage(context.TODO(), data, value.DefaultContext(key))
	if err != nil {
		return nil, &TransformError{Key: key, Err: err}
	}
	return out, nil
}

// fromStorage transforms a stored value back to the encoded object,
// remembering whether it was stale.
func (s *Store) fromStorage(kv *mvccpb.KeyValue) ([]byte, error) {
	key := string(kv.Key)
	t := s.transformer(key)
	if t == nil {
		return kv.Value, nil
	}
	data, stale, err := t.TransformFromStorage(context.TODO(), kv.Value, value.DefaultContext(key))
	if err != nil {
		return nil, &TransformError{Key: key, Err: err}
	}
	s.transforms.note(key, kv.ModRevision, stale)
	return data, nil
}

// note records what a read of key at rev found: stale or not.
func (t *transforms) note(key string, rev int64, stale bool) {
	for {
		prev, ok := t.stale.Load(key)
		switch {
		case ok && prev.(int64) > rev:
			return // a newer revision was read already
		case stale && ok:
			if t.stale.CompareAndSwap(key, prev, rev) {
				return
			}
		case stale:
			if _, loaded := t.stale.LoadOrStore(key, rev); !loaded {
				return
			}
		case ok:
			if t.stale.CompareAndDelete(key, prev) {
				return
			}
		default:
			return
		}
	}
}

// forget drops what is known of key once it has been written.
func (s *Store) forget(key string) {
	if s.transforms != nil {
		s.transforms.stale.Delete(key)
	}
}

// Stale reports whether the value of key at mod revision rev was read
// through another transformer than the one that writes: an update that
// leaves the object as it is must still write it, so that it is stored
// with the writing provider and key, as upstream's GuaranteedUpdate does
// for its stale reads. This is what `kubectl replace` of every Secret
// relies on to rotate keys.
func (s *Store) Stale(key string, rev int64) bool {
	if s.transforms == nil {
		return false
	}
	v, ok := s.transforms.stale.Load(key)
	return ok && v.(int64) == rev
}
