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
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// agnhost runs one of agnhost's subcommands.
func agnhost(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: agnhost [netexec|nettest|serve-hostname|test-webserver|pause|entrypoint-tester|liveness|connect|porter|guestbook|dns-suffix|dns-server-list|etc-hosts|mounttest|grpc-health-checking|logs-generator|webhook|crd-conversion-webhook|test-service-account-issuer-discovery|mtlsserver|mtlsclient|net] [flags]")
	}
	switch args[0] {
	case "netexec":
		return netexec(ctx, args[1:])
	case "nettest":
		return nettest(ctx, args[1:])
	case "serve-hostname":
		return serveHostname(ctx, args[1:])
	case "test-webserver":
		return testWebserver(ctx, args[1:])
	case "pause":
		agnhostPause()
		return nil
	case "liveness":
		return liveness(ctx)
	case "entrypoint-tester":
		// Its argv, as the container's command and args made it.
		fmt.Println(append([]string{argv0(ctx)}, args...))
		return nil
	case "connect":
		return connect(args[1:])
	case "porter":
		return porter(ctx, args[1:])
	case "guestbook":
		return guestbook(ctx, args[1:])
	case "dns-suffix":
		return printResolvConf("search")
	case "dns-server-list":
		return printResolvConf("nameserver")
	case "etc-hosts":
		return printEtcHosts()
	case "mounttest":
		return mounttest(args[1:])
	case "grpc-health-checking":
		return grpcHealthChecking(ctx, args[1:])
	case "logs-generator":
		return logsGenerator(ctx, args[1:])
	case "webhook":
		return webhook(ctx, args[1:])
	case "crd-conversion-webhook":
		return crdConversionWebhook(ctx, args[1:])
	case "test-service-account-issuer-discovery":
		return issuerDiscovery(ctx, args[1:])
	case "mtlsserver":
		return mtlsServer(ctx, args[1:])
	case "mtlsclient":
		return mtlsClient(ctx, args[1:])
	case "net":
		return agnhostNet(ctx, args[1:])
	}
	return fmt.Errorf("agnhost %s is not built into svcnet (built in: netexec, nettest, serve-hostname, test-webserver, pause, entrypoint-tester, liveness, connect, porter, guestbook, dns-suffix, dns-server-list, etc-hosts, mounttest, grpc-health-checking, logs-generator, webhook, crd-conversion-webhook, test-service-account-issuer-discovery, mtlsserver, mtlsclient, net)", args[0])
}

// connect tries a TCP connection (or a UDP exchange) to host:port and
// fails with agnhost's prefixes, which upstream's e2e tests look for:
// UNKNOWN, DNS, TIMEOUT, REFUSED or OTHER.
func connect(args []string) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 0, "maximum time before returning an error")
	protocol := fs.String("protocol", "tcp", "tcp or udp")
	data := fs.String("udp-data", "hostname", "the UDP payload")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("UNKNOWN: %w", err)
	}
	if fs.NArg() != 1 {
		return errors.New("UNKNOWN: usage: agnhost connect [--timeout=D] [--protocol=tcp|udp] host:port")
	}
	dest := fs.Arg(0)
	if _, _, err := net.SplitHostPort(dest); err != nil {
		return fmt.Errorf("UNKNOWN: %w", err)
	}
	switch *protocol {
	case "", "tcp":
		if _, err := net.ResolveTCPAddr("tcp", dest); err != nil {
			return fmt.Errorf("DNS: %w", err)
		}
		conn, err := net.DialTimeout("tcp", dest, *timeout)
		if err != nil {
			return connectError(err)
		}
		return conn.Close()
	case "udp":
		if _, err := net.ResolveUDPAddr("udp", dest); err != nil {
			return fmt.Errorf("DNS: %w", err)
		}
		conn, err := net.Dial("udp", dest)
		if err != nil {
			return fmt.Errorf("OTHER: %w", err)
		}
		defer conn.Close()
		if *timeout > 0 {
			_ = conn.SetDeadline(time.Now().Add(*timeout))
		}
		if _, err := conn.Write([]byte(*data + "\n")); err != nil {
			return connectError(err)
		}
		n, err := conn.Read(make([]byte, 1024))
		if err != nil {
			return connectError(err)
		}
		if n == 0 {
			return errors.New("OTHER: No data received from the server. Cannot guarantee the server received the request.")
		}
		return nil
	}
	return fmt.Errorf("UNKNOWN: unsupported protocol %q", *protocol)
}

// connectError names a failed connection as agnhost connect does.
func connectError(err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("TIMEOUT")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("REFUSED")
	}
	return fmt.Errorf("OTHER: %w", err)
}

// netexec serves upstream's netexec endpoints over HTTP and its commands
// over UDP.
func netexec(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("netexec", flag.ContinueOnError)
	httpPort := fs.Int("http-port", 8080, "HTTP listen port")
	udpPort := fs.Int("udp-port", 8081, "UDP listen port (-1 for none)")
	fs.Int("sctp-port", -1, "SCTP listen port (not supported)")
	fs.Bool("http-override", false, "ignored")
	delay := fs.Int("delay-shutdown", 0, "seconds to keep serving after SIGTERM")
	udpAddrs := fs.String("udp-listen-addresses", "", "comma-separated IP addresses the UDP servers listen on (default: any)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// As agnhost: each address once (a host-network pod's HOST_IP is one
	// of its POD_IPS), any address when none is given.
	udpBind := []string{""}
	if *udpAddrs != "" {
		udpBind = nil
		for a := range strings.SplitSeq(*udpAddrs, ",") {
			if net.ParseIP(a) == nil {
				return fmt.Errorf("parseAddress: invalid address %s", a)
			}
			if !slices.Contains(udpBind, a) {
				udpBind = append(udpBind, a)
			}
		}
	}
	exit := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "NOW: %v", time.Now())
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.RemoteAddr) })
	mux.HandleFunc("/serverport", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, *httpPort) })
	mux.HandleFunc("/hostname", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, hostname()) })
	mux.HandleFunc("/hostName", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, hostname()) })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	// Unready from SIGTERM on, while --delay-shutdown keeps it serving.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ctx.Err() != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "shutting down")
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Header.Get(r.FormValue("key")))
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		if c, err := strconv.Atoi(r.FormValue("code")); err == nil {
			w.WriteHeader(c)
		}
		fmt.Fprint(w, r.FormValue("msg"))
	})
	mux.HandleFunc("/envvar", func(w http.ResponseWriter, r *http.Request) {
		name := r.FormValue("var")
		if name == "" {
			http.Error(w, "'var' query parameter is required", http.StatusBadRequest)
			return
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			http.Error(w, fmt.Sprintf("env var %q is not set", name), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, v)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.FormValue("location"), http.StatusFound)
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.FormValue("code"))
		w.WriteHeader(http.StatusNoContent)
		select {
		case exit <- code:
		default:
		}
	})
	mux.HandleFunc("/shutdown", func(w http.ResponseWriter, r *http.Request) {
		select {
		case exit <- 0:
		default:
		}
	})
	mux.HandleFunc("/shell", shellHandler)
	mux.HandleFunc("/dial", dialHandler)

	for _, addr := range udpBind {
		if *udpPort <= 0 {
			break
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, strconv.Itoa(*udpPort)))
		if err != nil {
			return fmt.Errorf("listen on UDP port %d: %w", *udpPort, err)
		}
		defer pc.Close()
		go udpServer(pc)
	}
	// Serving ends on SIGTERM (after --delay-shutdown), /exit or /shutdown.
	sctx, cancel := context.WithCancel(context.Background())
	codec := make(chan int, 1)
	go func() {
		code := 0
		select {
		case <-ctx.Done():
			time.Sleep(time.Duration(*delay) * time.Second)
		case code = <-exit:
		case <-sctx.Done():
		}
		codec <- code
		cancel()
	}()
	fmt.Printf("Started HTTP server on port %d\n", *httpPort)
	if *udpPort > 0 {
		fmt.Printf("Started UDP server on port %d\n", *udpPort)
	}
	err := serve(sctx, []int{*httpPort}, logNetexec(mux))
	cancel()
	if code := <-codec; code > 0 && err == nil {
		os.Exit(code)
	}
	return err
}

// netexecQueries are the query parameters netexec's log line of a request
// shows, by path, as upstream's handlers print them.
var netexecQueries = map[string][]string{
	"/echo":     {"msg", "code"},
	"/exit":     {"code", "timeout", "wait"},
	"/envvar":   {"var"},
	"/dial":     {"host", "protocol", "port", "request", "tries"},
	"/shell":    {"cmd"},
	"/redirect": {"location", "code"},
}

// logNetexec logs each request before h answers it, as upstream's netexec
// does ("GET /echo?msg=poststart&code="): upstream's lifecycle hook tests
// find their hooks' requests in the server's log.
func logNetexec(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := "GET " + r.URL.Path
		switch params := netexecQueries[r.URL.Path]; {
		case r.URL.Path == "/redirect":
			// Upstream names the location msg, and prints the method.
			line = fmt.Sprintf("%s /redirect?msg=%s&code=%s", r.Method, r.FormValue("location"), r.FormValue("code"))
		case r.URL.Path == "/header" && r.FormValue("key") != "":
			line += "?key=" + r.FormValue("key")
		case len(params) > 0:
			var q []string
			for _, p := range params {
				q = append(q, p+"="+r.FormValue(p))
			}
			line += "?" + strings.Join(q, "&")
		}
		log.Print(line)
		h.ServeHTTP(w, r)
	})
}

// udpServer answers netexec's UDP commands until pc is closed.
func udpServer(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		cmd := strings.TrimSpace(string(buf[:n]))
		var reply string
		switch {
		case cmd == "hostname" || cmd == "hostName":
			reply = hostname()
		case strings.HasPrefix(cmd, "echo "):
			reply = strings.TrimPrefix(cmd, "echo ")
		case cmd == "clientip":
			reply = addr.String()
		case cmd == "serverport":
			reply = strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
		case strings.HasPrefix(cmd, "envvar "):
			reply = os.Getenv(strings.TrimPrefix(cmd, "envvar "))
		default:
			continue
		}
		_, _ = pc.WriteTo([]byte(reply), addr)
	}
}

// shellHandler runs cmd with /bin/sh and answers {"output": ..., "error": ...}.
func shellHandler(w http.ResponseWriter, r *http.Request) {
	cmd := r.FormValue("shellCommand")
	if cmd == "" {
		cmd = r.FormValue("cmd")
	}
	out := map[string]string{}
	if cmd != "" {
		b, err := exec.CommandContext(r.Context(), "/bin/sh", "-c", cmd).CombinedOutput()
		out["output"] = string(b)
		if err != nil {
			out["error"] = err.Error()
		}
	}
	writeJSON(w, out)
}

// dialHandler makes `tries` requests to host:port and lists the answers,
// as upstream's tests use it to probe connectivity from inside a pod.
func dialHandler(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	host, port, request, protocol := q.Get("host"), q.Get("port"), q.Get("request"), q.Get("protocol")
	tries, err := strconv.Atoi(q.Get("tries"))
	if err != nil || tries < 1 {
		tries = 1
	}
	if protocol == "" {
		protocol = "http"
	}
	addr := net.JoinHostPort(host, port)
	var responses, errs []string
	for range tries {
		var reply string
		var err error
		switch protocol {
		case "http":
			reply, err = dialHTTP(r.Context(), "http://"+addr+"/"+strings.TrimPrefix(request, "/"))
		case "udp":
			reply, err = dialUDP(addr, request)
		default:
			err = fmt.Errorf("unsupported protocol %q", protocol)
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		responses = append(responses, reply)
	}
	writeJSON(w, map[string][]string{"responses": responses, "errors": errs})
}

// dialHTTP gets url on a connection of its own, as upstream's netexec
// does: a kept-alive connection to a Service would reach the same
// endpoint every time, and the tests that count the endpoints answering
// would never see the others.
func dialHTTP(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func dialUDP(addr, request string) (string, error) {
	c, err := net.DialTimeout("udp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(request)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// serveHostname answers every request with the pod's name.
func serveHostname(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve-hostname", flag.ContinueOnError)
	port := fs.Int("port", 9376, "port to serve on")
	useHTTP := fs.Bool("http", true, "serve HTTP")
	useUDP := fs.Bool("udp", false, "serve UDP")
	useTCP := fs.Bool("tcp", false, "serve raw TCP")
	fs.Bool("close", false, "close connections after each answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name := hostname()
	if *useUDP {
		pc, err := net.ListenPacket("udp", ":"+strconv.Itoa(*port))
		if err != nil {
			return fmt.Errorf("listen on UDP port %d: %w", *port, err)
		}
		defer pc.Close()
		go func() {
			buf := make([]byte, 1024)
			for {
				_, addr, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo([]byte(name), addr)
			}
		}()
	}
	if *useTCP {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(*port))
		if err != nil {
			return fmt.Errorf("listen on TCP port %d: %w", *port, err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, name)
				c.Close()
			}
		}()
	}
	fmt.Printf("Serving on port %d.\n", *port)
	if *useHTTP && !*useTCP {
		// serve says it is ready once the HTTP port listens too.
		return serve(ctx, []int{*port}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, name)
		}))
	}
	ready()
	<-ctx.Done()
	return nil
}

// httpEcho is hashicorp/http-echo: it answers every request with -text.
func httpEcho(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("http-echo", flag.ContinueOnError)
	listen := fs.String("listen", ":5678", "address and port to listen on")
	text := fs.String("text", "", "text to put on the webpage")
	status := fs.Int("status-code", http.StatusOK, "HTTP status code to answer with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *text == "" {
		if t := os.Getenv("ECHO_TEXT"); t != "" {
			*text = t
		} else {
			return errors.New("missing -text option")
		}
	}
	_, p, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", *listen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("listen port %q: %w", p, err)
	}
	pod := hostname()
	fmt.Printf("%s [INFO] server is listening on %s\n", time.Now().Format("2006/01/02 15:04:05"), *listen)
	return serve(ctx, []int{port}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-App-Name", "http-echo")
		w.Header().Set("X-App-Version", "1.0.0")
		w.Header().Set(PodHeader, pod)
		if r.URL.Path == "/health" {
			writeJSON(w, map[string]string{"status": "ok"})
			return
		}
		w.WriteHeader(*status)
		fmt.Fprintln(w, *text)
		fmt.Printf("%s %s %s %s\n", r.Host, r.RemoteAddr, r.Method, r.URL.Path)
	}))
}

// agnhostPause is agnhost's pause: it says it paused, waits for SIGTERM or
// SIGINT, leaves why it ends in its termination message file (under runc,
// where the node provides that file; a host process has none) and on its
// output, and ends with 2 for SIGTERM, 1 for SIGINT.
func agnhostPause() {
	fmt.Println("Paused")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Println("Signals registered")
	ready()
	sig := <-sigs
	msg := fmt.Sprintf("exiting because of signal %q\n", sig)
	path := os.Getenv("TERMINATION_MESSAGE_PATH")
	if path == "" {
		path = "/dev/termination-log"
	}
	if _, err := os.Stat(path); err == nil {
		_ = os.WriteFile(path, []byte(msg), 0o644)
	}
	_, _ = os.Stdout.WriteString(msg)
	code := 2
	if sig == syscall.SIGINT {
		code = 1
	}
	os.Exit(code)
}

type argv0Key struct{}

// withArgv0 tells agnhost the path it was started by.
func withArgv0(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, argv0Key{}, name)
}

// argv0 is the path agnhost was started by, /agnhost unless told.
func argv0(ctx context.Context) string {
	if name, ok := ctx.Value(argv0Key{}).(string); ok && name != "" {
		return name
	}
	return "/agnhost"
}
