package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestLocalStorageEviction: a pod whose writes outgrow its containers'
// ephemeral-storage limits, or whose emptyDir outgrows its sizeLimit, is
// evicted as the kubelet's eviction manager does (Failed, reason Evicted,
// the kubelet's message, a DisruptionTarget condition, an Evicted event);
// a pod within its limits runs on.
func TestLocalStorageEviction(t *testing.T) {
	t.Parallel()
	needRunc(t, "a host process's writes are the host's, not the container's")
	c := startNodeCluster(t, "--runtime", "runc")
	pod := func(name, script, limits, volumes string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  nodeName: ` + nodeName + `
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    command: [sh, -c, '` + script + `; exec sleep 3600']
` + limits + volumes + "---\n"
	}
	c.withStdin(pod("hog", "dd if=/dev/zero of=/fill bs=1M count=10", "    resources: {limits: {ephemeral-storage: 5Mi}}\n", "")+
		pod("overflow", "dd if=/dev/zero of=/data/fill bs=1M count=3", "    volumeMounts: [{name: data, mountPath: /data}]\n",
			"  volumes: [{name: data, emptyDir: {sizeLimit: 1Mi}}]\n")+
		pod("calm", "dd if=/dev/zero of=/fill bs=1M count=1", "    resources: {limits: {ephemeral-storage: 50Mi}}\n", ""),
		"apply", "-f", "-")
	for name, msg := range map[string]string{
		"hog":      "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. ",
		"overflow": `Usage of EmptyDir volume "data" exceeds the limit "1Mi". `,
	} {
		eventually(t, 60*time.Second, func() string {
			got := c.jsonpath("pod", name, `{.status.phase}|{.status.reason}|{.status.message}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}`)
			if got != "Failed|Evicted|"+msg+"|TerminationByKubelet" {
				return name + ": " + got
			}
			return ""
		})
	}
	if events := c.must("get", "events", "--field-selector", "involvedObject.name=hog,reason=Evicted", "-o", "jsonpath={.items[*].message}"); !strings.Contains(events, "exceeds the total limit") {
		t.Errorf("no Evicted event for hog: %q", events)
	}
	if got := c.jsonpath("pod", "calm", "{.status.phase}"); got != "Running" {
		t.Errorf("a pod within its limits: phase %q, want Running", got)
	}
}
