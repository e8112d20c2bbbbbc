package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/storage"
)

// initialEventsEnd is the annotation on the bookmark that ends the initial
// events of a sendInitialEvents watch.
const initialEventsEnd = "k8s.io/initial-events-end"

// watcher writes one watch stream.
type watcher struct {
	s        *Server
	res      *registry.Resource
	f        outputFormat
	include  metav1.IncludeObjectPolicy
	w        http.ResponseWriter
	frames   interface{ Write([]byte) (int, error) }
	flusher  http.Flusher
	headers  bool // table column definitions already sent
	embedded runtime.Encoder
	events   runtime.Encoder
}

func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) error {
	f, opts, topts, sel, err := readList(r, ri)
	if err != nil {
		return err
	}
	if f.as == "PartialObjectMetadataList" {
		f.as = "PartialObjectMetadata"
	}
	// Upstream ends a watch after timeoutSeconds, or after 30 to 60 minutes.
	timeout := time.Duration(1800+rand.IntN(1800)) * time.Second
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	rv := opts.ResourceVersion
	sendInitial := rv == "" || rv == "0"
	if opts.SendInitialEvents != nil {
		sendInitial = *opts.SendInitialEvents
	}
	var initial []runtime.Object
	var from int64
	if rv != "" && rv != "0" {
		n, err := strconv.ParseInt(rv, 10, 64)
		if err != nil || n <= 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", rv))
		}
		from = n + 1
	}
	if sendInitial {
		lo := storage.ListOptions{}
		if !sel.everything() {
			lo.Filter = sel.matches
		}
		page, err := s.store.List(ctx, prefix(ri.res, ri.namespace), lo)
		if err != nil {
			return storageError(err, ri.res, "")
		}
		initial, from = page.Items, page.Revision+1
	} else if from == 0 {
		cur, err := s.store.Revision(ctx)
		if err != nil {
			return storageError(err, ri.res, "")
		}
		from = cur + 1
	}

	wt, err := newWatcher(s, ri.res, f, topts.IncludeObject, w)
	if err != nil {
		return err
	}
	events := s.store.Watch(ctx, prefix(ri.res, ri.namespace), from)
	for _, obj := range initial {
		if err := wt.send(watch.Added, obj); err != nil {
			return nil
		}
	}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowWatchBookmarks {
		if err := wt.bookmark(from-1, true); err != nil {
			return nil
		}
	}
	wt.flush()
	for ev := range events {
		var err error
		switch {
		case ev.Err != nil:
			var c *storage.CompactedError
			if errors.As(ev.Err, &c) {
				_ = wt.sendStatus(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from-1, c.Compacted)))
			} else {
				_ = wt.sendStatus(apierrors.NewInternalError(ev.Err))
			}
			return nil
		case ev.Progress:
			if opts.AllowWatchBookmarks && f.as != "Table" {
				err = wt.bookmark(ev.Revision, false)
			}
		default:
			err = wt.sendChange(ev, sel)
		}
		if err != nil {
			return nil // the client went away
		}
	}
	return nil
}

func newWatcher(s *Server, res *registry.Resource, f outputFormat, include metav1.IncludeObjectPolicy, w http.ResponseWriter) (*watcher, error) {
	if include == "" {
		include = metav1.IncludeMetadata
	}
	if f.as == "Table" {
		if _, err := s.table(res, nil, include, true); err != nil {
			return nil, err
		}
	}
	stream := f.info.StreamSerializer
	if stream == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("no stream serialization for %s", f.info.MediaType))
	}
	wt := &watcher{s: s, res: res, f: f, include: include, w: w, embedded: f.info.Serializer, events: stream.Serializer}
	wt.flusher, _ = w.(http.Flusher)
	ct := f.info.MediaType
	if ct == mediaProtobuf {
		ct += ";stream=watch"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	wt.frames = stream.Framer.NewFrameWriter(w)
	return wt, nil
}

func (wt *watcher) flush() {
	if wt.flusher != nil {
		wt.flusher.Flush()
	}
}

// sendChange turns a storage event into what a client with this selector
// sees: objects moving into or out of the selector appear as ADDED or
// DELETED.
func (wt *watcher) sendChange(ev storage.Event, sel *selector) error {
	matchAll := sel.everything()
	cur := ev.Type != watch.Deleted && (matchAll || sel.matches(ev.Object))
	prev := ev.Prev != nil && (matchAll || sel.matches(ev.Prev))
	var t watch.EventType
	switch {
	case ev.Type == watch.Deleted && prev:
		t = watch.Deleted
	case ev.Type == watch.Deleted:
		return nil
	case cur && prev && ev.Type == watch.Modified:
		t = watch.Modified
	case cur:
		t = watch.Added
	case prev:
		t = watch.Deleted
	default:
		return nil
	}
	if err := wt.send(t, ev.Object); err != nil {
		return err
	}
	wt.flush()
	return nil
}

// bookmark sends a BOOKMARK carrying only a resourceVersion.
func (wt *watcher) bookmark(rev int64, initialEnd bool) error {
	obj, err := newObject(wt.res)
	if err != nil {
		return err
	}
	a, _ := meta.Accessor(obj)
	a.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		a.SetAnnotations(map[string]string{initialEventsEnd: "true"})
	}
	if err := wt.send(watch.Bookmark, obj); err != nil {
		return err
	}
	wt.flush()
	return nil
}

func (wt *watcher) sendStatus(err error) error {
	st := statusOf(err)
	st.Kind, st.APIVersion = "Status", "v1"
	if e := wt.write(watch.Error, st); e != nil {
		return e
	}
	wt.flush()
	return nil
}

func (wt *watcher) send(t watch.EventType, obj runtime.Object) error {
	obj, err := served(wt.res, obj)
	if err != nil {
		return err
	}
	var out runtime.Object = obj
	switch wt.f.as {
	case "Table":
		if t == watch.Bookmark {
			break
		}
		tbl, err := wt.s.table(wt.res, []runtime.Object{obj}, wt.include, wt.headers)
		if err != nil {
			return err
		}
		tbl.ResourceVersion = rvString(obj)
		wt.headers = true
		out = tbl
	case "PartialObjectMetadata":
		out = partialMetadata(obj)
	}
	return wt.write(t, out)
}

func (wt *watcher) write(t watch.EventType, obj runtime.Object) error {
	registry.SetKind(obj)
	var buf bytes.Buffer
	if err := wt.embedded.Encode(obj, &buf); err != nil {
		return err
	}
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: buf.Bytes()}}
	return wt.events.Encode(ev, wt.frames)
}
