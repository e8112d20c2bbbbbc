package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// jobParallel is a Job of three completions, two at a time.
const jobParallel = `apiVersion: batch/v1
kind: Job
metadata:
  name: work
spec:
  completions: 3
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: work
        image: busybox
        command: ["sh", "-c", "echo done"]
`

// jobFailing fails every time: it must stop after backoffLimit retries.
const jobFailing = `apiVersion: batch/v1
kind: Job
metadata:
  name: broken
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: broken
        image: busybox
        command: ["sh", "-c", "exit 3"]
`

// jobIndexed prints its completion index.
const jobIndexed = `apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: busybox
        command: ["sh", "-c", "echo index=$JOB_COMPLETION_INDEX host=$(hostname)"]
`

// jobPerIndex fails its odd indexes, each with a budget of one retry.
const jobPerIndex = `apiVersion: batch/v1
kind: Job
metadata:
  name: per-index
spec:
  completions: 4
  parallelism: 2
  completionMode: Indexed
  backoffLimitPerIndex: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: busybox
        command: ["sh", "-c", "exit $((JOB_COMPLETION_INDEX % 2))"]
`

// cronJobEveryMinute runs every minute and keeps one successful Job.
const cronJobEveryMinute = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: tick
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: tick
            image: busybox
            command: ["sh", "-c", "date"]
`

// TestJobs runs Jobs and a CronJob on a node: completions and
// parallelism, the backoff limit, Indexed mode, the schedule with its
// history limit, kubectl create job/cronjob and the columns.
func TestJobs(t *testing.T) {
	t.Parallel()
	c := startNodeCluster(t).cluster
	// field reads a jsonpath template of one object.
	field := func(ns, kind, name, path string) string {
		out, _ := c.kubectl("", "get", kind, name, "-n", ns, "-o", "jsonpath="+path)
		return out
	}
	waitCondition := func(t *testing.T, ns, name, cond string, timeout time.Duration) {
		t.Helper()
		eventually(t, timeout, func() string {
			if got := field(ns, "job", name, `{.status.conditions[?(@.type=="`+cond+`")].status}`); got != "True" {
				return fmt.Sprintf("job %s: %s is %q; status %s", name, cond, got, field(ns, "job", name, "{.status}"))
			}
			return ""
		})
	}

	t.Run("CronJobHistory", func(t *testing.T) {
		t.Parallel()
		const ns = "jobs-cron"
		c.createNamespace(ns)
		c.withStdin(cronJobEveryMinute, "apply", "-n", ns, "-f", "-")
		// The first Job comes at the next minute, the second a minute
		// later; with a history of one the first then goes.
		var first string
		eventually(t, 75*time.Second, func() string {
			names := strings.Fields(c.must("get", "jobs", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"))
			if len(names) == 0 {
				return "no job yet"
			}
			first = names[0]
			return ""
		})
		if !strings.HasPrefix(first, "tick-") {
			t.Errorf("job name %q, want tick-<minutes>", first)
		}
		if got := field(ns, "job", first, `{.metadata.annotations.batch\.kubernetes\.io/cronjob-scheduled-timestamp}`); got == "" {
			t.Error("no cronjob-scheduled-timestamp annotation")
		}
		waitCondition(t, ns, first, "Complete", time.Minute)
		eventually(t, 75*time.Second, func() string {
			names := strings.Fields(c.must("get", "jobs", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"))
			if len(names) != 1 || names[0] == first {
				return fmt.Sprintf("jobs %v: want only the second one", names)
			}
			return ""
		})
		if got := field(ns, "cronjob", "tick", "{.status.lastScheduleTime}"); got == "" {
			t.Error("no lastScheduleTime")
		}
		eventually(t, time.Minute, func() string {
			if field(ns, "cronjob", "tick", "{.status.lastSuccessfulTime}") == "" {
				return "no lastSuccessfulTime"
			}
			return ""
		})
		out := c.must("get", "cronjobs", "-n", ns)
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
			strings.Join(strings.Fields(lines[0]), " ") != "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE" ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "tick * * * * * <none> False") {
			t.Errorf("kubectl get cronjobs:\n%s", out)
		}
		// A Job from a CronJob's template, by hand: from one that never
		// ticks, whose history limit of one keeps its only Job (tick's
		// would remove it once a later tick finished).
		c.must("create", "cronjob", "yearly", "--image=busybox", "--schedule=0 0 1 1 *", "-n", ns, "--", "true")
		c.must("create", "job", "manual", "--from=cronjob/yearly", "-n", ns)
		waitCondition(t, ns, "manual", "Complete", time.Minute)
		if got := field(ns, "job", "manual", "{.metadata.annotations.cronjob\\.kubernetes\\.io/instantiate}"); got != "manual" {
			t.Errorf("instantiate annotation %q", got)
		}
	})

	t.Run("CompletionsAndParallelism", func(t *testing.T) {
		const ns = "jobs-parallel"
		c.createNamespace(ns)
		c.withStdin(jobParallel, "apply", "-n", ns, "-f", "-")
		waitCondition(t, ns, "work", "Complete", 90*time.Second)
		if got := field(ns, "job", "work", "{.status.succeeded}/{.status.failed}"); got != "3/" {
			t.Errorf("succeeded/failed %s, want 3/", got)
		}
		pods := strings.Fields(c.must("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=work", "-o", "jsonpath={.items[*].status.phase}"))
		if len(pods) != 3 || slices.ContainsFunc(pods, func(p string) bool { return p != "Succeeded" }) {
			t.Errorf("pods %v, want three Succeeded", pods)
		}
		if got := c.must("get", "pods", "-n", ns, "-o", "jsonpath={.items[*].metadata.finalizers}"); got != "" {
			t.Errorf("finalizers left on finished pods: %s", got)
		}
		out := c.must("get", "jobs", "-n", ns, "-o", "wide")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR" ||
			!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "work Complete 3/3 ") ||
			!strings.Contains(strings.Join(strings.Fields(lines[1]), " "), "work busybox batch.kubernetes.io/controller-uid=") {
			t.Errorf("kubectl get jobs -o wide:\n%s", out)
		}
		if events := c.must("get", "events", "-n", ns, "--field-selector", "involvedObject.name=work", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(events, "SuccessfulCreate") || !strings.Contains(events, "Completed") {
			t.Errorf("events %s, want SuccessfulCreate and Completed", events)
		}
	})

	t.Run("BackoffLimit", func(t *testing.T) {
		const ns = "jobs-failing"
		c.createNamespace(ns)
		c.withStdin(jobFailing, "apply", "-n", ns, "-f", "-")
		// One failure, 10s of back-off, a second failure: past the limit.
		waitCondition(t, ns, "broken", "Failed", 90*time.Second)
		if got := field(ns, "job", "broken", `{.status.conditions[?(@.type=="Failed")].reason}/{.status.failed}`); got != "BackoffLimitExceeded/2" {
			t.Errorf("reason/failed %s, want BackoffLimitExceeded/2", got)
		}
		if got := field(ns, "job", "broken", `{.status.conditions[?(@.type=="FailureTarget")].status}`); got != "True" {
			t.Errorf("FailureTarget %q", got)
		}
		codes := c.must("get", "pods", "-n", ns, "-o", "jsonpath={.items[*].status.containerStatuses[0].state.terminated.exitCode}")
		if codes != "3 3" {
			t.Errorf("exit codes %q, want 3 3", codes)
		}
		if out := c.must("get", "job", "broken", "-n", ns); !strings.Contains(strings.Join(strings.Fields(out), " "), "broken Failed 0/1") {
			t.Errorf("kubectl get job:\n%s", out)
		}
	})

	t.Run("Indexed", func(t *testing.T) {
		const ns = "jobs-indexed"
		c.createNamespace(ns)
		c.withStdin(jobIndexed, "apply", "-n", ns, "-f", "-")
		waitCondition(t, ns, "indexed", "Complete", 90*time.Second)
		if got := field(ns, "job", "indexed", "{.status.completedIndexes}"); got != "0-2" {
			t.Errorf("completedIndexes %q, want 0-2", got)
		}
		var logs []string
		for _, pod := range strings.Fields(c.must("get", "pods", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}")) {
			logs = append(logs, strings.TrimSpace(c.must("logs", pod, "-n", ns)))
		}
		slices.Sort(logs)
		if want := []string{"index=0 host=indexed-0", "index=1 host=indexed-1", "index=2 host=indexed-2"}; !slices.Equal(logs, want) {
			t.Errorf("logs %q, want %q", logs, want)
		}
	})

	t.Run("BackoffLimitPerIndex", func(t *testing.T) {
		const ns = "jobs-per-index"
		c.createNamespace(ns)
		c.withStdin(jobPerIndex, "apply", "-n", ns, "-f", "-")
		// Every index runs: the odd ones twice (10s of back-off between),
		// then fail for good.
		waitCondition(t, ns, "per-index", "Failed", 2*time.Minute)
		if got := field(ns, "job", "per-index", `{.status.conditions[?(@.type=="Failed")].reason} {.status.failedIndexes} {.status.completedIndexes} {.status.failed} {.status.succeeded}`); got != "FailedIndexes 1,3 0,2 4 2" {
			t.Errorf("reason, failedIndexes, completedIndexes, failed, succeeded: %q, want FailedIndexes 1,3 0,2 4 2", got)
		}
		counts := strings.Fields(c.must("get", "pods", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.labels.batch\.kubernetes\.io/job-completion-index}:{.metadata.annotations.batch\.kubernetes\.io/job-index-failure-count} {end}`))
		slices.Sort(counts)
		if want := []string{"0:0", "1:0", "1:1", "2:0", "3:0", "3:1"}; !slices.Equal(counts, want) {
			t.Errorf("pods by index:failure-count %v, want %v", counts, want)
		}
	})

	t.Run("KubectlCreate", func(t *testing.T) {
		const ns = "jobs-create"
		c.createNamespace(ns)
		c.must("create", "job", "hello", "--image=busybox", "-n", ns, "--", "echo", "hello")
		waitCondition(t, ns, "hello", "Complete", time.Minute)
		pod := c.must("get", "pods", "-n", ns, "-l", "job-name=hello", "-o", "jsonpath={.items[0].metadata.name}")
		if got := strings.TrimSpace(c.must("logs", pod, "-n", ns)); got != "hello" {
			t.Errorf("logs %q", got)
		}
		c.must("create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "-n", ns, "--", "date")
		if got := field(ns, "cronjob", "nightly", "{.spec.concurrencyPolicy}/{.spec.successfulJobsHistoryLimit}/{.spec.suspend}"); got != "Allow/3/false" {
			t.Errorf("cronjob defaults %s", got)
		}
		if _, err := c.kubectl("", "create", "cronjob", "bad", "--image=busybox", "--schedule=TZ=UTC 0 3 * * *", "-n", ns); err == nil {
			t.Error("a TZ= schedule was accepted")
		}
	})
}
