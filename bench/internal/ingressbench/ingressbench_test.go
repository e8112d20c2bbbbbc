package ingressbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/bench/internal/benchmain"
)

func TestMain(m *testing.M) {
	if Child() {
		return
	}
	os.Exit(m.Run())
}

// TestRunSmall runs the benchmark at a small size to keep it working,
// nginx's baseline included (CI installs nginx); the figures themselves
// come from `go run ./bench/ingress`.
func TestRunSmall(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if nginx, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("nginx is not installed: .ci/run installs nginx-light for the baseline")
			}
			t.Log("nginx is not installed: the baseline is not measured")
		}
	}
	for _, cpus := range []int{0, 1} {
		t.Run(fmt.Sprintf("proxy-cpus=%d", cpus), func(t *testing.T) {
			if cpus > 0 && runtime.NumCPU() <= cpus {
				t.Skipf("%d CPUs: none left for the load generator", runtime.NumCPU())
			}
			runSmall(t, nginx, cpus)
		})
	}
}

func runSmall(t *testing.T, nginx string, proxyCPUs int) {
	res, printed := benchmain.Small(t, func(ctx context.Context) (*Result, error) {
		return Run(ctx, Options{Conns: 4, Round: 200 * time.Millisecond, Rounds: 1, Changes: 3, Nginx: nginx, ProxyCPUs: proxyCPUs})
	})
	if res.DirectRPS <= 0 || res.ProxyRPS <= 0 || res.ProxyP99 <= 0 || res.DirectP99 <= 0 || res.ChangeP50 <= 0 {
		t.Errorf("a measurement is missing: %+v", res)
	}
	if !strings.Contains(printed, "ratio proxy/direct") {
		t.Errorf("printed result lacks the ratio:\n%s", printed)
	}
	if nginx != "" && (res.NginxRPS <= 0 || res.NginxP99 <= 0 || !strings.Contains(printed, "ratio proxy/nginx")) {
		t.Errorf("nginx's baseline is missing: %+v\n%s", res, printed)
	}
	if proxyCPUs > 0 && (len(res.ProxyCPUs) != proxyCPUs || len(res.LoadCPUs) == 0 || !strings.Contains(printed, "proxy and nginx [")) {
		t.Errorf("the CPUs given are not reported: %+v\n%s", res, printed)
	}
}
