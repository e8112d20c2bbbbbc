package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/logs"
	"github.com/svcnet/svcnet/internal/netns"
	"github.com/svcnet/svcnet/internal/node/images"
	"github.com/svcnet/svcnet/internal/node/oci"
)

// maxLogSize rotates a container's log, as the kubelet's
// containerLogMaxSize (10Mi) does.
const maxLogSize = logs.MaxFileSize

// sandbox is a pod's network and its generated files.
type sandbox struct {
	ip    string
	netns string
	etc   string
	// pidNS is the PID namespace the pod's containers share, its pause
	// container's (shareProcessNamespace under runc); empty: one each.
	pidNS string
}

// waitReason is why a container is not running: the Waiting state's
// reason and message.
type waitReason struct{ reason, message string }

// runPod makes the pod's sandbox, starts or restarts its containers as
// its spec and restart policy say, and reports its status.
func (a *Agent) runPod(ctx context.Context, w *podWorker, pod *corev1.Pod) error {
	uid := string(pod.UID)
	sb, err := a.ensureSandbox(pod)
	if err == nil && a.images != nil && ptr.Deref(pod.Spec.ShareProcessNamespace, false) {
		sb.pidNS, err = a.ensurePause(ctx, pod, sb)
	}
	if err != nil {
		a.event(pod, "", corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return err
	}
	runs, err := a.rt.containers(uid)
	if err != nil {
		return err
	}
	latest := latestRuns(runs)
	waiting := map[string]waitReason{}
	var retry time.Duration
	want := func(d time.Duration) {
		if d > 0 && (retry == 0 || d < retry) {
			retry = d
		}
	}
	want(a.setUpVolumes(pod))
	policy := pod.Spec.RestartPolicy
	// A running container takes a resize in place, unless the pod no
	// longer fits the node.
	infeasible, resizePending := a.resizeInfeasible(pod), false
	resize := func(c *container, spec *corev1.Container) error {
		if infeasible != "" {
			resizePending = resizePending || resizeWanted(c, spec)
			return nil
		}
		restarting, err := a.resizeInPlace(ctx, pod, c, spec)
		if restarting {
			want(time.Millisecond)
		}
		return err
	}

	initDone := true
	initialized := podInitialized(pod, latest)
	for i := range pod.Spec.InitContainers {
		spec := &pod.Spec.InitContainers[i]
		c := latest[spec.Name]
		if isSidecar(spec) {
			// A restartable init container runs beside the pod's
			// containers and starts again whenever it ends, whatever the
			// pod's restart policy; the next container starts once it has
			// started (its startup probe passed).
			if c != nil && c.Running() {
				if msg, failed := a.probes.unhealthy(c); failed {
					if err := a.killContainer(ctx, pod, c, gracePeriod(pod, probeGrace(spec)), msg); err != nil {
						return err
					}
					want(time.Millisecond)
				} else if err := resize(c, spec); err != nil {
					return err
				} else if started, _ := a.probes.state(c, spec); started || initialized {
					continue
				}
			} else {
				want(a.maybeStart(ctx, pod, sb, spec, c, waiting))
				if initialized {
					continue
				}
			}
			initDone = false
			// Until its start is seen: a probe's first success pokes the
			// pod, a start without probes does not.
			want(200 * time.Millisecond)
			break
		}
		if c != nil && !c.Running() && c.Exit.ExitCode == 0 {
			continue
		}
		initDone = false
		if c == nil || (!c.Running() && policy != corev1.RestartPolicyNever) {
			want(a.maybeStart(ctx, pod, sb, spec, c, waiting))
		}
		break
	}
	if initDone {
		for i := range pod.Spec.Containers {
			spec := &pod.Spec.Containers[i]
			c := latest[spec.Name]
			switch {
			case c == nil:
				want(a.maybeStart(ctx, pod, sb, spec, nil, waiting))
			case c.Running():
				if msg, failed := a.probes.unhealthy(c); failed {
					if err := a.killContainer(ctx, pod, c, gracePeriod(pod, probeGrace(spec)), msg); err != nil {
						return err
					}
					want(time.Millisecond)
				} else if err := resize(c, spec); err != nil {
					return err
				}
			case restarts(policy, c.Exit.ExitCode):
				want(a.maybeStart(ctx, pod, sb, spec, c, waiting))
			}
		}
	}

	// Ephemeral containers start once each, initialized pod or not, and
	// never again; one that targets a container runs in its PID
	// namespace.
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if latest[ec.Name] != nil {
			continue
		}
		esb := sb
		if t := latest[ec.TargetContainerName]; t != nil && t.Running() && t.State.PID > 0 {
			esb = &sandbox{ip: sb.ip, netns: sb.netns, etc: sb.etc, pidNS: fmt.Sprintf("/proc/%d/ns/pid", t.State.PID)}
		}
		want(a.maybeStart(ctx, pod, esb, (*corev1.Container)(&ec.EphemeralContainerCommon), nil, waiting))
	}

	if runs, err = a.rt.containers(uid); err != nil {
		return err
	}
	if err := a.rt.prune(runs); err != nil {
		return fmt.Errorf("prune old runs: %w", err)
	}
	var running []string
	for _, c := range latestRuns(runs) {
		if c.Running() {
			running = append(running, c.dir)
			if spec := specContainer(pod, c.Spec.Name); spec != nil {
				a.probes.ensure(pod, spec, c, sb.ip)
			}
		}
	}
	w.setRunning(running)
	a.probes.retain(pod.UID, running)

	st := a.podStatus(pod, runs, waiting, false)
	st.PodIP, st.PodIPs = sb.ip, []corev1.PodIP{{IP: sb.ip}}
	if resizePending {
		st.Conditions = append(st.Conditions, resizePendingCondition(pod, infeasible))
	}
	if err := a.updateStatus(ctx, pod, st); err != nil {
		return err
	}
	if retry > 0 {
		w.pokeAfter(retry)
	}
	return nil
}

// isSidecar reports a restartable init container (restartPolicy: Always),
// which runs for the pod's whole life.
func isSidecar(spec *corev1.Container) bool {
	return ptr.Deref(spec.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways
}

// podInitialized reports whether the pod's containers have been started
// once: its init containers have done their part, and a sidecar that ends
// later no longer holds them back.
func podInitialized(pod *corev1.Pod, latest map[string]*container) bool {
	return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return latest[c.Name] != nil })
}

// restarts reports whether a container that exited with code is run
// again under the pod's restart policy.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// probeGrace is a liveness probe's own termination grace period.
func probeGrace(c *corev1.Container) *int64 {
	if c.LivenessProbe != nil && c.LivenessProbe.TerminationGracePeriodSeconds != nil {
		return c.LivenessProbe.TerminationGracePeriodSeconds
	}
	return nil
}

// latestRuns maps each container name to its newest run.
func latestRuns(runs []*container) map[string]*container {
	m := map[string]*container{}
	for _, c := range runs {
		if prev, ok := m[c.Spec.Name]; !ok || c.Spec.Attempt > prev.Spec.Attempt {
			m[c.Spec.Name] = c
		}
	}
	return m
}

// maybeStart starts the container's next run unless its last run is in
// back-off; it returns when the pod wants its next sync.
func (a *Agent) maybeStart(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, prev *container, waiting map[string]waitReason) time.Duration {
	attempt := 0
	if prev != nil {
		attempt = prev.Spec.Attempt + 1
		key := backoffKey(pod, spec.Name)
		if a.backoff.IsInBackOffSince(key, prev.Exit.FinishedAt) {
			d := a.backoff.Get(key)
			waiting[spec.Name] = waitReason{reason: "CrashLoopBackOff", message: fmt.Sprintf(
				"back-off %s restarting failed container=%s pod=%s_%s(%s)", d, spec.Name, pod.Name, pod.Namespace, pod.UID)}
			a.event(pod, spec.Name, corev1.EventTypeWarning, "BackOff", fmt.Sprintf(
				"Back-off restarting failed container %s in pod %s_%s(%s)", spec.Name, pod.Name, pod.Namespace, pod.UID))
			return d - time.Since(prev.Exit.FinishedAt)
		}
		a.backoff.Next(key, prev.Exit.FinishedAt)
	}
	if wr, err := a.startContainer(ctx, pod, sb, spec, attempt); err != nil {
		waiting[spec.Name] = wr
		if wr.reason == "ImagePullBackOff" || wr.reason == "ErrImagePull" {
			return 10 * time.Second
		}
		return 2 * time.Second
	}
	return 0
}

// startContainer makes the container's run (a host process, or an image
// run by runc) and starts it. A container that cannot be started gets its
// waiting reason.
func (a *Agent) startContainer(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) (waitReason, error) {
	if err := a.volumesMounted(pod); err != nil {
		return waitReason{reason: "ContainerCreating"}, err
	}
	if wr, err := a.createAndStart(ctx, pod, sb, spec, attempt); err != nil {
		return wr, err
	}
	a.event(pod, spec.Name, corev1.EventTypeNormal, "Started", "Started container "+spec.Name)
	if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
		c, err := a.rt.load(a.rt.containerDir(string(pod.UID), spec.Name, attempt))
		if err == nil && c != nil {
			if err := a.runHandler(ctx, pod, c, spec.Lifecycle.PostStart); err != nil {
				msg := fmt.Sprintf("PostStartHook failed: %v", err)
				a.event(pod, spec.Name, corev1.EventTypeWarning, "FailedPostStartHook", msg)
				_ = a.killContainer(ctx, pod, c, gracePeriod(pod, nil), "FailedPostStartHook")
			}
		}
	}
	return waitReason{}, nil
}

// createAndStart makes the container's run and starts it: a host process,
// or an image run by runc, which the image garbage collector leaves alone
// meanwhile.
func (a *Agent) createAndStart(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) (waitReason, error) {
	build := a.processContainer
	if a.images != nil {
		build = a.imageContainer
		if _, mapped := a.cfg.Images[imageName(spec.Image)]; mapped {
			build = a.tableContainer
		}
	}
	cs, wr, err := build(ctx, pod, sb, spec, attempt)
	if err != nil {
		return wr, err
	}
	if cs.release != nil {
		defer cs.release()
	}
	cs.Resources = appliedResources(spec)
	a.event(pod, spec.Name, corev1.EventTypeNormal, "Created", "Created container: "+spec.Name)
	if err := a.rt.start(string(pod.UID), *cs); err != nil {
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return waitReason{reason: "RunContainerError", message: err.Error()}, err
	}
	return waitReason{}, nil
}

// withDefaults adds what a container runtime sets from the image and the
// pod: PATH, HOSTNAME and HOME, unless the container sets them.
func withDefaults(env []string, hostname string) []string {
	have := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		have[k] = true
	}
	var out []string
	for _, d := range []struct{ k, v string }{
		{"PATH", defaultPath},
		{"HOSTNAME", hostname},
		{"HOME", "/root"},
	} {
		if !have[d.k] {
			out = append(out, d.k+"="+d.v)
		}
	}
	return append(out, env...)
}

// etcMounts are the pod's own /etc files, unless the container mounts a
// volume there.
func etcMounts(etc string, spec *corev1.Container) []bindFile {
	var out []bindFile
	for _, f := range []string{"hosts", "resolv.conf", "hostname"} {
		target := "/etc/" + f
		taken := false
		for _, m := range spec.VolumeMounts {
			if m.MountPath == target {
				taken = true
			}
		}
		if _, err := os.Stat(target); err != nil || taken {
			continue
		}
		out = append(out, bindFile{Source: filepath.Join(etc, f), Target: target})
	}
	return out
}

// ensureSandbox records the pod, sets up its network and writes its
// /etc files. The record comes first, so that a crash in between leaves
// nothing that a restarted agent does not know of.
func (a *Agent) ensureSandbox(pod *corev1.Pod) (*sandbox, error) {
	uid := string(pod.UID)
	dir := a.rt.podDir(uid)
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return nil, fmt.Errorf("create pod dir: %w", err)
	}
	rec, err := a.loadPodRecord(uid)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	rec.Pod = pod
	if err := writeJSON(filepath.Join(dir, podRecordFile), rec); err != nil {
		return nil, err
	}
	sb := &sandbox{etc: etc}
	if pod.Spec.HostNetwork {
		sb.ip = a.nodeIP.String()
		sb.netns = netns.Path(a.cfg.NetNS)
	} else {
		s, err := a.net.Setup(uid)
		if err != nil {
			return nil, err
		}
		sb.ip, sb.netns = s.IP.String(), s.NetNS
	}
	if rec.IP != sb.ip || rec.NetNS != sb.netns {
		rec.IP, rec.NetNS = sb.ip, sb.netns
		if err := writeJSON(filepath.Join(dir, podRecordFile), rec); err != nil {
			return nil, err
		}
	}
	hosts, err := podHosts(pod, sb.ip, a.cfg.ClusterDomain)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"hosts":       hosts,
		"resolv.conf": podResolvConf(pod, a.resolv, a.cfg.ClusterDNS, a.cfg.ClusterDomain),
		"hostname":    []byte(podHostname(pod) + "\n"),
	}
	for name, data := range files {
		if old, err := os.ReadFile(filepath.Join(etc, name)); err == nil && string(old) == string(data) {
			continue
		}
		// Written in place: a running container's bind mount keeps
		// pointing at this inode.
		if err := os.WriteFile(filepath.Join(etc, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("write pod %s: %w", name, err)
		}
	}
	return sb, nil
}

// pauseImage is the image of a pod's pause container.
const pauseImage = "registry.k8s.io/pause:3.10"

// ensurePause runs the pod's pause container, as the sandbox's: the
// first process of the PID namespace its containers share, which reaps
// their orphans; it returns the namespace's path. A pause container that
// has ended (its namespace's processes with it) is started again.
func (a *Agent) ensurePause(ctx context.Context, pod *corev1.Pod, sb *sandbox) (string, error) {
	uid := string(pod.UID)
	prev, err := a.rt.sandbox(uid)
	if err != nil {
		return "", err
	}
	if prev != nil && prev.Running() {
		return fmt.Sprintf("/proc/%d/ns/pid", prev.State.PID), nil
	}
	attempt := 0
	if prev != nil {
		attempt = prev.Spec.Attempt + 1
	}
	img, pause, builtin, err := a.tableImage(ctx, &corev1.Container{Name: "POD", Image: pauseImage})
	if err != nil {
		return "", err
	}
	cs, _, err := a.runcContainer(ctx, pod, sb, pause, attempt, img, builtin)
	if err != nil {
		return "", err
	}
	defer cs.release()
	dir := filepath.Join(a.rt.sandboxDir(uid), strconv.Itoa(attempt))
	cs.Log = filepath.Join(a.rt.sandboxDir(uid), "pause.log")
	if err := a.rt.startIn(dir, *cs); err != nil {
		return "", fmt.Errorf("start the pause container: %w", err)
	}
	if prev != nil {
		if err := os.RemoveAll(prev.dir); err != nil {
			return "", fmt.Errorf("remove the pause container's last run: %w", err)
		}
	}
	run, err := a.rt.load(dir)
	if err != nil || run == nil || run.State == nil {
		return "", fmt.Errorf("the pause container's state: %v", err)
	}
	return fmt.Sprintf("/proc/%d/ns/pid", run.State.PID), nil
}

// stopPause stops the pod's pause container, after its containers.
func (a *Agent) stopPause(ctx context.Context, uid string) error {
	run, err := a.rt.sandbox(uid)
	if err != nil || run == nil {
		return err
	}
	return a.rt.stop(ctx, run, 2*time.Second)
}

// processContainer is a run of the image table's program for the
// container, a process of the host.
func (a *Agent) processContainer(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) (*containerSpec, waitReason, error) {
	cmd, err := a.cfg.Images.resolve(a.cfg.Self, spec)
	if err != nil {
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", spec.Image, err))
		return nil, waitReason{reason: "ImagePullBackOff", message: fmt.Sprintf("Back-off pulling image %q: %v", spec.Image, err)}, err
	}
	a.event(pod, spec.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", spec.Image))
	env, mounts, wr, err := a.containerFiles(ctx, pod, sb, spec)
	if err != nil {
		return nil, wr, err
	}
	env = withDefaults(env, podHostname(pod))
	if env, err = withApplets(a.cfg.DataDir, a.cfg.Images, spec.Image, env); err != nil {
		return nil, waitReason{reason: "CreateContainerConfigError", message: err.Error()}, err
	}
	cs := a.runSpec(pod, sb, spec, attempt)
	cs.ImageRef = cmd.imageID
	cs.Path, cs.Args, cs.Env, cs.Dir = cmd.path, expandArgs(cmd.argv, env), env, spec.WorkingDir
	cs.Mounts, cs.Groups, cs.WaitReady = mounts, containerGroups(pod), cmd.builtin
	return cs, waitReason{}, nil
}

// runSpec is what every run of the container has, however it runs: its
// names, image, hostname, network, log and streams.
func (a *Agent) runSpec(pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) *containerSpec {
	return &containerSpec{
		Name:       spec.Name,
		Attempt:    attempt,
		Image:      imageRef(spec.Image),
		Hostname:   podHostname(pod),
		NetNS:      sb.netns,
		Log:        a.rt.logPath(pod.Namespace, pod.Name, string(pod.UID), spec.Name, attempt),
		MaxLogSize: maxLogSize,
		Stdin:      spec.Stdin,
		StdinOnce:  spec.StdinOnce,
		TTY:        spec.TTY,
		// Read from the file by runc's runs alone: a host process has
		// no root of its own to hold it.
		TerminationMessagePath: spec.TerminationMessagePath,
		FallbackToLogs:         spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// imageContainer is a run of the container's pulled image with runc.
func (a *Agent) imageContainer(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) (*containerSpec, waitReason, error) {
	img, wr, err := a.ensureImage(ctx, pod, spec)
	if err != nil {
		return nil, wr, err
	}
	return a.runcContainer(ctx, pod, sb, spec, attempt, img, false)
}

// tableContainer is a run with runc of an image the image table holds, in
// the image the node assembles for it: a built-in program runs from the
// node's own svcnet executable, bound into the container.
func (a *Agent) tableContainer(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int) (*containerSpec, waitReason, error) {
	img, spec, builtin, err := a.tableImage(ctx, spec)
	if err != nil {
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", spec.Image, err))
		return nil, waitReason{reason: "ErrImagePull", message: err.Error()}, err
	}
	a.event(pod, spec.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", spec.Image))
	return a.runcContainer(ctx, pod, sb, spec, attempt, img, builtin)
}

// tableImage is the assembled image of the image table's entry for the
// container, and the container as it runs there: a built-in program's
// command names it in the image.
func (a *Agent) tableImage(ctx context.Context, spec *corev1.Container) (*images.Image, *corev1.Container, bool, error) {
	run, _ := a.cfg.Images.plan(spec)
	img, err := a.localImage(ctx, imageName(spec.Image), run.img)
	if err != nil {
		return nil, spec, false, err
	}
	if run.program != "" {
		argv := builtinArgv(cmp.Or(run.img.Setuid, selfPath), run, spec)
		spec = spec.DeepCopy()
		spec.Command, spec.Args = argv, nil
	}
	return img, spec, run.program != "", nil
}

// runcContainer is a run of img with runc; builtin says the container's
// command is a built-in program, which says when it has started.
func (a *Agent) runcContainer(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container, attempt int, img *images.Image, builtin bool) (*containerSpec, waitReason, error) {
	env, mounts, wr, err := a.containerFiles(ctx, pod, sb, spec)
	if err != nil {
		return nil, wr, err
	}
	// The runtime's HOSTNAME, unless the container sets its own.
	env = append([]string{"HOSTNAME=" + podHostname(pod)}, env...)
	if builtin {
		mounts = append(mounts, bindFile{Source: a.cfg.Self, Target: selfPath, ReadOnly: true})
		env = append(env, builtinReadyEnv)
	}
	if run, known := a.cfg.Images.plan(spec); known {
		if sh, ok := shellMount(run.img, env); ok {
			mounts = append(mounts, sh)
		}
	}
	release := a.imageGC.hold(img.ID, time.Now())
	id := newContainerID()
	oc, err := a.ociContainer(pod, sb, spec, img, env, mounts, id)
	if err != nil {
		release()
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return nil, waitReason{reason: "CreateContainerConfigError", message: err.Error()}, err
	}
	cs := a.runSpec(pod, sb, spec, attempt)
	cs.ID, cs.ImageRef = id, cs.Image
	if len(img.RepoDigests) > 0 {
		cs.ImageRef = img.RepoDigests[0]
	}
	cs.OCI, cs.Layers, cs.Runc, cs.WaitReady = oci.Spec(*oc), a.images.LayerDirs(img), a.runc, builtin
	cs.release = release
	return cs, waitReason{}, nil
}

// containerFiles are the container's environment and its mounts: the
// pod's /etc files and the volumes.
func (a *Agent) containerFiles(ctx context.Context, pod *corev1.Pod, sb *sandbox, spec *corev1.Container) ([]string, []bindFile, waitReason, error) {
	env, err := a.env.containerEnv(ctx, pod, spec, sb.ip, a.nodeIP.String())
	if err != nil {
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return nil, nil, waitReason{reason: "CreateContainerConfigError", message: err.Error()}, err
	}
	mounts, err := a.containerMounts(pod, spec, env)
	if err != nil {
		a.event(pod, spec.Name, corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return nil, nil, waitReason{reason: "CreateContainerConfigError", message: err.Error()}, err
	}
	return env, append(etcMounts(sb.etc, spec), mounts...), waitReason{}, nil
}
