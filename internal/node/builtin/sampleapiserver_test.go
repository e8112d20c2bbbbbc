package builtin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceSampleAPIServerArgs are the sample-apiserver container's
// arguments in upstream's Aggregator conformance test.
var conformanceSampleAPIServerArgs = []string{
	"--etcd-servers=http://127.0.0.1:2379",
	"--tls-cert-file=/apiserver.local.config/certificates/tls.crt",
	"--tls-private-key-file=/apiserver.local.config/certificates/tls.key",
	"--audit-log-path=-",
	"--audit-log-maxage=0",
	"--audit-log-maxbackup=0",
}

// The sample-apiserver's command takes the conformance test's arguments:
// its flags parse, its options complete and validate (what it does
// before it serves, which needs an API server), and they say what the
// arguments do. In a process of its own: the command registers with the
// apiserver library's global registry once a process.
func TestSampleAPIServerFlags(t *testing.T) {
	if os.Getenv("SVCNET_TEST_SAMPLE_APISERVER_FLAGS") == "1" {
		if err := sampleAPIServerFlags(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ok")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSampleAPIServerFlags$")
	cmd.Env = append(os.Environ(), "SVCNET_TEST_SAMPLE_APISERVER_FLAGS=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok\n") {
		t.Fatalf("%v:\n%s", err, out)
	}
}

// sampleAPIServerFlags checks the conformance test's arguments as the
// command's RunE does before it runs the server.
func sampleAPIServerFlags() error {
	cmd, o := sampleAPIServerCommand(context.Background(), conformanceSampleAPIServerArgs)
	if err := cmd.ParseFlags(conformanceSampleAPIServerArgs); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if args := cmd.Flags().Args(); len(args) != 0 {
		return fmt.Errorf("arguments left: %q", args)
	}
	if err := cmd.PersistentPreRunE(cmd, nil); err != nil {
		return fmt.Errorf("set the component registry: %w", err)
	}
	if err := o.Complete(); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if err := o.Validate(nil); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	r := o.RecommendedOptions
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"etcd servers", r.Etcd.StorageConfig.Transport.ServerList, []string{"http://127.0.0.1:2379"}},
		{"certificate", r.SecureServing.ServerCert.CertKey.CertFile, "/apiserver.local.config/certificates/tls.crt"},
		{"key", r.SecureServing.ServerCert.CertKey.KeyFile, "/apiserver.local.config/certificates/tls.key"},
		{"secure port", r.SecureServing.BindPort, 443},
		{"audit log", r.Audit.LogOptions.Path, "-"},
		{"audit log max age", r.Audit.LogOptions.MaxAge, 0},
		{"audit log max backups", r.Audit.LogOptions.MaxBackups, 0},
		{"the BanFlunder admission plugin", slices.Contains(r.Admission.RecommendedPluginOrder, "BanFlunder"), true},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			return fmt.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	return nil
}

// The program starts as the image's does and answers --help with the
// command's usage, then ends with 0: nothing svcnet links conflicts with
// what it sets up (flags, feature gates, metrics) at its start.
func TestSampleAPIServerHelp(t *testing.T) {
	cmd, out := startBuiltin(t, SampleAPIServer, t.TempDir(), "/sample-apiserver", "--help")
	if st := waitBuiltin(t, cmd, 30*time.Second); st.ExitCode() != 0 {
		t.Fatalf("--help: %v:\n%s", st, out)
	}
	for _, want := range []string{"Launch a wardle API server", "--etcd-servers", "--tls-cert-file", "--audit-log-path", "--emulated-version", "--feature-gates"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
