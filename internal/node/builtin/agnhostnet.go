package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"
)

// agnhostNet is agnhost's net in runner mode (--runner NAME --options
// JSON) with upstream's two runners, the server and client of kube-proxy's
// CLOSE_WAIT test: nat-closewait-server accepts one connection on
// LocalAddr, half-closes it (sends its FIN) and waits
// PostFinTimeoutSeconds; nat-closewait-client connects to RemoteAddr,
// waits for that FIN (at most TimeoutSeconds), then keeps its end open
// PostFinTimeoutSeconds, so that the connection sits in CLOSE_WAIT. The
// --serve mode, which runs runners on HTTP requests, is not built in.
func agnhostNet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("net", flag.ContinueOnError)
	runner := fs.String("runner", "", "runner to execute: nat-closewait-server or nat-closewait-client")
	options := fs.String("options", "", "JSON options to the runner")
	serve := fs.String("serve", "", "HTTP address to run runners from (not built into svcnet)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *serve != "" {
		return errors.New("agnhost net --serve is not built into svcnet; use --runner")
	}
	logger := log.New(os.Stdout, "# ", 0)
	var opts closeWaitOptions
	if err := json.Unmarshal([]byte(*options), &opts); err != nil {
		return fmt.Errorf("invalid options JSON: %w", err)
	}
	logger.Printf("Run %+v", opts)
	switch *runner {
	case "nat-closewait-server":
		return closeWaitServer(ctx, logger, opts)
	case "nat-closewait-client":
		return closeWaitClient(ctx, logger, opts)
	}
	return fmt.Errorf("invalid runner %q: built in are nat-closewait-server and nat-closewait-client", *runner)
}

// closeWaitOptions are both runners' options, upstream's names.
type closeWaitOptions struct {
	LocalAddr             string
	RemoteAddr            string
	TimeoutSeconds        int
	PostFinTimeoutSeconds int
	LeakConnection        bool
}

func (o closeWaitOptions) postFin() time.Duration {
	return time.Duration(o.PostFinTimeoutSeconds) * time.Second
}

func closeWaitServer(ctx context.Context, logger *log.Logger, o closeWaitOptions) error {
	ln, err := net.Listen("tcp", o.LocalAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.LocalAddr, err)
	}
	defer ln.Close()
	logger.Printf("Server listening on %v", ln.Addr())
	ready()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	conn, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	defer conn.Close()
	logger.Printf("Client connected")
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return fmt.Errorf("half-close: %w", err)
	}
	logger.Printf("Server sent FIN, waiting %v seconds", o.PostFinTimeoutSeconds)
	sleepCtx(ctx, o.postFin())
	logger.Printf("Done")
	return nil
}

func closeWaitClient(ctx context.Context, logger *log.Logger, o closeWaitOptions) error {
	ready()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", o.RemoteAddr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", o.RemoteAddr, err)
	}
	// A leaked connection is the kernel's to close when the process ends.
	if !o.LeakConnection {
		defer conn.Close()
	}
	logger.Printf("Connected to server")
	if o.TimeoutSeconds > 0 {
		_ = conn.SetReadDeadline(time.Now().Add(time.Duration(o.TimeoutSeconds) * time.Second))
	}
	n, err := conn.Read(make([]byte, 1))
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("wait for the server's FIN: %w", err)
	}
	if n != 0 {
		return errors.New("got data but expected EOF")
	}
	logger.Printf("Server has half-closed the connection, waiting %v seconds", o.PostFinTimeoutSeconds)
	sleepCtx(ctx, o.postFin())
	logger.Printf("Done")
	return nil
}
