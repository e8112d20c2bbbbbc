// Package headless runs headless Chromium (Debian's `chromium`) for the
// topology page's end-to-end test and benchmark, through the DevTools
// protocol (chromedp): one browser in a temporary profile, started on
// demand and killed, with every process of its tree, on Close.
package headless

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

// ExecName is the browser's executable, as Debian's package names it.
const ExecName = "chromium"

// Available is the browser's path, or why there is none.
func Available() (string, error) {
	p, err := exec.LookPath(ExecName)
	if err != nil {
		return "", fmt.Errorf("headless browser: %w", err)
	}
	return p, nil
}

// Browser is a running headless Chromium.
type Browser struct {
	// Tab is the tab it opened with.
	*Tab

	cancelAlloc context.CancelFunc
	profile     string
	closeOnce   sync.Once
	closeErr    error
}

// Tab is one tab of the browser.
type Tab struct {
	// Ctx is the tab's context for chromedp.Run; it ends on Close.
	Ctx    context.Context
	cancel context.CancelFunc
}

// Start starts the browser with a window of width×height and opens a
// blank tab. It reaches only what the pages it is sent to ask for: it
// runs with background networking, sync and updates off.
func Start(ctx context.Context, width, height int) (*Browser, error) {
	path, err := Available()
	if err != nil {
		return nil, err
	}
	profile, err := os.MkdirTemp("", "svcnet-chromium-")
	if err != nil {
		return nil, fmt.Errorf("browser profile dir: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.Flag("no-sandbox", os.Geteuid() == 0), // Chromium refuses root otherwise
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Should the test die, the browser dies with it.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		}),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	b := &Browser{Tab: &Tab{Ctx: tab, cancel: cancelTab}, cancelAlloc: cancelAlloc, profile: profile}
	if err := chromedp.Do(tab); err != nil { // starts the browser
		_ = b.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	return b, nil
}

// Close stops the browser, kills whatever of its process tree is left
// (Chromium's helpers can outlive it; each names the profile in its
// command line) and removes the profile. Later calls return the first's
// error.
func (b *Browser) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

// NewTab opens another tab, which closes with the browser or on its
// Close (which aborts whatever its page still loads or streams).
func (b *Browser) NewTab() (*Tab, error) {
	ctx, cancel := chromedp.NewContext(b.Tab.Ctx)
	t := &Tab{Ctx: ctx, cancel: cancel}
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("open a tab: %w", err)
	}
	return t, nil
}

// Close closes the tab.
func (t *Tab) Close() { t.cancel() }

func (b *Browser) close() error {
	b.Tab.Close()
	b.cancelAlloc()
	var errs []error
	// Helpers may fork as the browser dies: look until a few quiet passes.
	deadline := time.Now().Add(5 * time.Second)
	for quiet := 0; quiet < 3; time.Sleep(20 * time.Millisecond) {
		if n := killUsing(b.profile); n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("browser processes of %s still running after 5s", b.profile))
			break
		}
	}
	// A helper may still write the profile as it dies.
	for i := 0; ; i++ {
		err := os.RemoveAll(b.profile)
		if err == nil {
			break
		}
		if i == 50 {
			errs = append(errs, fmt.Errorf("remove browser profile: %w", err))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}

// killUsing SIGKILLs the processes whose command line names the profile
// dir, and says how many it found.
func killUsing(profile string) int {
	want := []byte("--user-data-dir=" + profile)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for arg := range bytes.SplitSeq(cmdline, []byte{0}) {
			if bytes.Equal(arg, want) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil || !errors.Is(err, syscall.ESRCH) {
					n++
				}
				break
			}
		}
	}
	return n
}

// Navigate opens u in the tab and waits for it to load.
func (t *Tab) Navigate(u string) error {
	if err := chromedp.Do(t.Ctx, chromedp.Navigate(u)); err != nil {
		return fmt.Errorf("open %s: %w", u, err)
	}
	return nil
}

// Eval evaluates a JavaScript expression in the tab's page, its result (a
// promise's, awaited) decoded as a T.
func Eval[T any](t *Tab, expr string) (T, error) {
	v, err := chromedp.Run(t.Ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return v, fmt.Errorf("evaluate %s: %w", firstLine(strings.TrimSpace(expr)), err)
	}
	return v, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + "…"
	}
	return s
}
