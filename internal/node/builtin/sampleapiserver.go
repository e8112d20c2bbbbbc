package builtin

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/sample-apiserver/pkg/cmd/server"
)

// sampleAPIServer plays upstream's e2e image sample-apiserver with
// upstream's own program, k8s.io/sample-apiserver's main: the
// wardle.example.com API server, with the container's arguments, the
// cluster's in-cluster configuration (the pod's service account), etcd
// at its --etcd-servers; ctx (SIGTERM) ends it, as the image's signal
// handler does, and it ends the process with the command's exit code.
func sampleAPIServer(ctx context.Context, args []string) error {
	cmd, _ := sampleAPIServerCommand(ctx, args)
	if code := cli.Run(cmd); code != 0 {
		os.Exit(code)
	}
	return nil
}

// sampleAPIServerCommand is the sample-apiserver's command, as its main
// makes it, to run with args, and the options its flags set. Once a
// process: it registers its component and feature gate with the
// apiserver library's global registry.
func sampleAPIServerCommand(ctx context.Context, args []string) (*cobra.Command, *server.WardleServerOptions) {
	o := server.NewWardleServerOptions(os.Stdout, os.Stderr)
	cmd := server.NewCommandStartWardleServer(ctx, o, false)
	// Not nil, which would have cobra parse the os.Args of svcnet's own
	// command line.
	cmd.SetArgs(append([]string{}, args...))
	return cmd, o
}
