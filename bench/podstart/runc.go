package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/svcnet/svcnet/internal/node/images/imagetest"
)

// compareRunc runs the -runc comparison: N pods of the image table's
// busybox on a node started with --runtime process (host processes, a
// shim each), then, on a node started with --runtime runc, N pods of an
// image pulled into its store, each run by runc under the node's shim
// host. start starts a cluster with the extra flags given.
func compareRunc(ctx context.Context, start func(name string, extra ...string) (*cluster, error), n, workers int) error {
	if !imagetest.StaticBusybox() {
		return fmt.Errorf("%s is not a static busybox (Debian package busybox-static)", imagetest.BusyboxPath)
	}
	host, stopRegistry := imagetest.Registry("", "")
	defer stopRegistry()
	pulled := host + "/bench/busybox:1"
	if err := imagetest.PushBusybox(pulled); err != nil {
		return err
	}
	pod := func(image string) func(string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
		return func(name string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
				NodeName:                      nodeName,
				TerminationGracePeriodSeconds: new(int64),
				Containers:                    []corev1.Container{{Name: "main", Image: image, Command: []string{"sleep", "3600"}}},
			}}, nil
		}
	}
	// measure runs the pods of image on a new cluster with the flags
	// given, after warm-up pods of the same image, and returns their
	// start latencies and the PSS of the processes the node runs for them.
	measure := func(name, image string, flags ...string) (*result, int64, error) {
		c, err := start(name, flags...)
		if err != nil {
			return nil, 0, err
		}
		defer c.stop()
		for _, ns := range []string{"warm", "measured"} {
			if _, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				return nil, 0, fmt.Errorf("create namespace %s: %w", ns, err)
			}
			// Pods wait for the namespace's default service account.
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
				return err == nil, nil
			})
			if err != nil {
				return nil, 0, fmt.Errorf("the default service account of %s: %w", ns, err)
			}
		}
		// A first pod pulls or assembles the image; the measured ones
		// find it in the store.
		if _, err := batch(ctx, c.client, "warm", 1, 1, pod(image), podReady); err != nil {
			return nil, 0, fmt.Errorf("%s: warm-up pod: %w", name, err)
		}
		if err := deleteAll(ctx, c.client, "warm"); err != nil {
			return nil, 0, err
		}
		res, err := batch(ctx, c.client, "measured", n, workers, pod(image), podReady)
		if err != nil {
			return nil, 0, fmt.Errorf("%s pods: %w", name, err)
		}
		pss, err := podsPSS(c.data)
		if err != nil {
			return nil, 0, err
		}
		return res, pss, deleteAll(ctx, c.client, "measured")
	}
	base, basePSS, err := measure("process", "busybox", "--runtime", "process")
	if err != nil {
		return err
	}
	runc, runcPSS, err := measure("runc", pulled, "--runtime", "runc")
	if err != nil {
		return err
	}
	mib := func(kb int64) float64 { return float64(kb) / 1024 / float64(n) }
	fmt.Printf("pods: %d, sleep 3600, %d concurrent creates\n", n, workers)
	fmt.Printf("--runtime process (busybox as a host process, baseline) create → Ready: p50 %v  p99 %v  all Ready after %v  PSS per pod %.2f MiB\n",
		pct(base.done, 0.5), pct(base.done, 0.99), base.total.Round(time.Millisecond), mib(basePSS))
	fmt.Printf("--runtime runc (%s, in the store) create → Ready: p50 %v  p99 %v  all Ready after %v  PSS per pod %.2f MiB\n",
		pulled, pct(runc.done, 0.5), pct(runc.done, 0.99), runc.total.Round(time.Millisecond), mib(runcPSS))
	fmt.Printf("ratio runc/process: p50 %.2fx  p99 %.2fx  PSS %.2fx\n",
		float64(pct(runc.done, 0.5))/float64(max(pct(base.done, 0.5), time.Millisecond)),
		float64(pct(runc.done, 0.99))/float64(max(pct(base.done, 0.99), time.Millisecond)), float64(runcPSS)/float64(max(basePSS, 1)))
	return nil
}

// podsPSS is the PSS, in KiB, of the node's container shims and shim host under data
// and of all their descendants (runc's and the containers' processes).
func podsPSS(data string) (int64, error) {
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 4 || args[1] != "node" || (args[2] != "shim" && args[2] != "shims") || !strings.HasPrefix(args[3], data+"/") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		total += treePSS(pid)
	}
	return total, nil
}

// treePSS is the PSS of pid and its descendants, in KiB.
func treePSS(pid int) int64 {
	total := pss(pid)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, c := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(c); err == nil {
				total += treePSS(child)
			}
		}
	}
	return total
}

// pss reads a process's Pss from smaps_rollup, in KiB (0 if it is gone).
func pss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}
