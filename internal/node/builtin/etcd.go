package builtin

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"strings"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// notifySocketEnv is where a program that speaks systemd's sd_notify
// protocol sends its state, as etcd does.
const notifySocketEnv = "NOTIFY_SOCKET"

// etcd plays the etcd images with etcd's own main (etcdmain, the etcd
// binary's), so its flags, ETCD_* environment, logs and data dir (the
// --data-dir, else <name>.etcd in the working directory) are etcd's.
// It ends the process itself: SIGTERM and SIGINT stop the server, then
// end the process by the signal, as etcd does. It says it is ready once it
// serves clients: etcd tells systemd so ("READY=1" to NOTIFY_SOCKET),
// which here is a socket of the program's own.
func etcd(argv []string) error {
	stop, err := readyOnNotify()
	if err != nil {
		return err
	}
	defer stop()
	// Its gateway and grpc-proxy commands read os.Args, as etcd's do.
	os.Args = argv
	etcdmain.Main(argv) // returns only from those commands
	return nil
}

// readyOnNotify points NOTIFY_SOCKET at a datagram socket of the
// program's own (abstract, in the pod's network namespace, with a random
// name) and calls ready when the program says READY=1 there; stop closes
// it.
func readyOnNotify() (stop func(), err error) {
	name := "@svcnet-notify-" + rand.Text()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("listen for sd_notify: %w", err)
	}
	if err := os.Setenv(notifySocketEnv, name); err != nil {
		conn.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed by stop
			}
			for l := range strings.SplitSeq(string(buf[:n]), "\n") {
				if l == "READY=1" {
					ready()
				}
			}
		}
	}()
	return func() {
		_ = os.Unsetenv(notifySocketEnv)
		conn.Close()
		<-done
	}, nil
}
