package builtin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// liveness is agnhost liveness: a server on port 8080 whose /healthz
// answers ok for its first 10 seconds and 500 after, as upstream's probe
// tests expect, with /started (the time since it started) and /redirect
// (a 302 to ?loc=).
func liveness(ctx context.Context) error {
	return serve(ctx, []int{8080}, livenessHandler(time.Now(), time.Now))
}

// livenessHandler answers liveness's endpoints for a server started at
// started, reading the clock from now.
func livenessHandler(started time.Time, now func() time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/started", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, now().Sub(started).String())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if d := now().Sub(started); d.Seconds() > 10 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "error: %v", d.Seconds())
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		loc, err := url.QueryUnescape(r.URL.Query().Get("loc"))
		if err != nil {
			http.Error(w, fmt.Sprintf("invalid redirect: %q", r.URL.Query().Get("loc")), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, loc, http.StatusFound)
	})
	return mux
}
