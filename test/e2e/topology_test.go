package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/internal/topology/headless"
)

// TestTopology opens the topology page in headless Chromium through
// `kubectl proxy`, as a user would: the Services and their pods show,
// the empty Service is marked, a Deployment scaled 2 → 3 shows its third
// pod without a reload within 2s of the API having it Ready, and a click
// on the broken Service shows the doctor's finding. The page's screenshot
// is the test's artifact (go test -artifacts).
func TestTopology(t *testing.T) {
	t.Parallel()
	if _, err := headless.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs chromium (.ci/run): %v", err)
		}
		t.Skipf("needs Debian's chromium: %v", err)
	}
	c := startNodeCluster(t)
	c.withStdin(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeName: `+nodeName+`
      terminationGracePeriodSeconds: 1
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: typo}
spec:
  selector: {app: wbe}
  ports: [{port: 80}]
`, "apply", "-f", "-")
	c.must("rollout", "status", "deployment/web", "--timeout=90s")

	proxy := startKubectlProxy(t, c.cluster)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := headless.Start(ctx, 1600, 1200)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	page := "http://" + proxy + "/svcnet/topology/"
	if err := b.Navigate(page); err != nil {
		t.Fatal(err)
	}
	// pageState is what the page shows of the scenario.
	type pageState struct {
		Ready       bool   `json:"ready"`
		Web         string `json:"web"`
		TypoEmpty   string `json:"typoEmpty"`
		Typo        string `json:"typo"`
		WebPods     int    `json:"webPods"`
		WebPodsSeen int    `json:"webPodsSeen"`
		Status      string `json:"status"`
	}
	const stateJS = `(() => {
		const q = (s) => document.querySelector(s);
		const web = q('[data-service="default/web"]'), typo = q('[data-service="default/typo"]');
		return {
			ready: window.topologyReady === true,
			web: web ? web.textContent : "",
			typo: typo ? typo.textContent : "",
			typoEmpty: typo ? (typo.dataset.empty || "") : "",
			webPods: document.querySelectorAll('#pods [data-pod^="default/web-"][data-ready="true"]').length,
			webPodsSeen: document.querySelectorAll('#pods [data-pod^="default/web-"]').length,
			status: q('#status').textContent,
		};
	})()`
	state := func() pageState {
		t.Helper()
		s, err := headless.Eval[pageState](b.Tab, stateJS)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	eventually(t, 30*time.Second, func() string {
		s := state()
		if !s.Ready || s.TypoEmpty != "true" || s.WebPods != 2 || !regexp.MustCompile(`2/2 ready`).MatchString(s.Web) ||
			!regexp.MustCompile(`0 ready`).MatchString(s.Typo) {
			return fmt.Sprintf("the page shows %+v", s)
		}
		return ""
	})

	// Scale 2 → 3: the page shows the third Ready pod within 2s of the
	// API having it, with no reload (the page's own watches).
	apiReady := watchReadyPods(t, c.clientset(), "default", "app=web", 3)
	c.must("scale", "deployment/web", "--replicas=3")
	deadline := time.Now().Add(2 * time.Minute)
	var pageAt time.Time
	for {
		s := state()
		if s.WebPods == 3 && pageAt.IsZero() {
			pageAt = time.Now()
		}
		at := time.Unix(0, apiReady.Load())
		if apiReady.Load() != 0 {
			if !pageAt.IsZero() {
				// Negative when the page's watch was first.
				lag := pageAt.Sub(at)
				t.Logf("the page showed the third Ready pod %s after the API had it", lag.Round(time.Millisecond))
				if lag > 2*time.Second {
					t.Errorf("the page showed the third pod %s after the API had it Ready, want within 2s", lag)
				}
				break
			}
			if time.Since(at) > 2*time.Second {
				t.Fatalf("the API has had 3 Ready pods for 2s, the page shows %+v", s)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Deployment has not 3 Ready pods after 2 minutes; the page shows %+v", s)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A click on the empty Service: its detail and the doctor's finding.
	if err := chromedp.Do(b.Ctx, chromedp.Click(chromedp.CSS(`[data-service="default/typo"]`))); err != nil {
		t.Fatalf("click typo: %v", err)
	}
	eventually(t, 30*time.Second, func() string {
		type detail struct {
			Detail, Verdict, State, Finding, Sentence string
		}
		got, err := headless.Eval[detail](b.Tab, `(() => {
			const q = (s) => document.querySelector(s);
			const f = q('#diagnosis [data-finding="SelectorMatchesNoPods"]');
			return {
				Detail: q('#detail').dataset.detail || "",
				Verdict: (q('#detail [data-verdict]') || {}).textContent || "",
				State: q('#diagnosis').dataset.state || "",
				Finding: f ? f.dataset.severity : "",
				Sentence: f ? f.textContent : (q('#diagnosis') || {}).textContent || "",
			};
		})()`)
		if err != nil {
			t.Fatal(err)
		}
		if got.Detail != "default/typo" || got.State != "done" || got.Finding != "error" ||
			!regexp.MustCompile(`Did you mean app=web\?`).MatchString(got.Sentence) || !regexp.MustCompile(`No endpoints`).MatchString(got.Verdict) {
			return fmt.Sprintf("after the click the page shows %+v", got)
		}
		return ""
	})

	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.ArtifactDir(), "topology.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}

// startKubectlProxy runs `kubectl proxy` on a free loopback port for the
// cluster's admin kubeconfig and returns its host:port; it stops when the
// test ends.
func startKubectlProxy(t *testing.T, c *cluster) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := c.kubectlCommand(ctx, []string{"proxy", "--address=127.0.0.1", "--port=0"})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl proxy: %v", err)
	}
	addr := make(chan string, 1)
	scanned := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-scanned // kubectl's stdout closed: it has exited
		_ = cmd.Wait()
	})
	go func() { // ends when kubectl does (its stdout closes)
		defer close(scanned)
		sc := bufio.NewScanner(out)
		re := regexp.MustCompile(`Starting to serve on (127\.0\.0\.1:\d+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && len(addr) == 0 {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("kubectl proxy exited before serving")
		}
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl proxy did not start serving within 30s")
		return ""
	}
}

// watchReadyPods watches the pods of selector and returns the time (Unix
// nanoseconds, 0 until then) at which want of them were first Ready.
func watchReadyPods(t *testing.T, cs kubernetes.Interface, ns, selector string, want int) *atomic.Int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for i := range list.Items {
		ready[list.Items[i].Name] = podReady(&list.Items[i]) && list.Items[i].DeletionTimestamp == nil
	}
	var at atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(ready, pod.Name)
			} else {
				ready[pod.Name] = podReady(pod) && pod.DeletionTimestamp == nil
			}
			n := 0
			for _, r := range ready {
				if r {
					n++
				}
			}
			if n >= want && at.Load() == 0 {
				at.Store(time.Now().UnixNano())
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return &at
}
