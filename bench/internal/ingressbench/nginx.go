package ingressbench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// nginxConf proxies /bench to the backend as ingress-nginx configures an
// Ingress path by default: upstream keep-alive (320 idle connections,
// 10000 requests, 60s), client keep-alive 75s and 1000 requests, HTTP/1.1
// to the upstream with the headers ingress-nginx sets, no response
// buffering, one worker per CPU. Access logs are off, as the svcnet proxy
// writes none.
const nginxConf = `daemon off;
%[4]s
pid %[1]s/nginx.pid;
error_log stderr warn;
events {
    worker_connections 16384;
    multi_accept on;
}
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    keepalive_timeout 75s;
    keepalive_requests 1000;
    map $http_upgrade $connection_upgrade {
        default upgrade;
        '' '';
    }
    upstream bench {
        server %[2]s;
        keepalive 320;
        keepalive_requests 10000;
        keepalive_timeout 60s;
    }
    server {
        listen %[3]s;
        location /bench {
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header X-Request-ID $request_id;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Host $http_host;
            proxy_set_header X-Forwarded-Port $server_port;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Scheme $scheme;
            proxy_pass http://bench;
        }
    }
}
`

// workers is nginx's worker set-up: one worker per CPU of the machine
// (ingress-nginx's default) or, given cpus, one pinned to each.
func workers(cpus []int) string {
	if len(cpus) == 0 {
		return "worker_processes auto;"
	}
	masks := make([]string, len(cpus))
	for i, c := range cpus {
		// A mask's rightmost digit is CPU 0.
		masks[i] = "1" + strings.Repeat("0", c)
	}
	return fmt.Sprintf("worker_processes %d;\nworker_cpu_affinity %s;", len(cpus), strings.Join(masks, " "))
}

// startNginx runs the nginx binary bin in front of backend on a free
// port of 127.0.0.1, its workers on cpus (none: on all), and returns its
// URL once it serves /bench, and a function that stops it and removes
// its files.
func startNginx(ctx context.Context, bin, backend string, cpus []int) (string, func(), error) {
	dir, err := os.MkdirTemp("", "ingressbench-nginx-")
	if err != nil {
		return "", nil, err
	}
	// The port is taken from a listener closed just before nginx binds it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, backend, addr, workers(cpus)), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-p", dir, "-c", conf, "-e", "stderr")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start nginx: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		// SIGTERM is nginx's fast shutdown; the master stops its workers.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		os.RemoveAll(dir)
	}
	url := "http://" + addr
	// Waiting ends early if nginx exits (a bad config, a taken port).
	waitCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-exited:
			cancel()
		case <-waitCtx.Done():
		}
	}()
	err = waitStatus(waitCtx, url+"/bench", http.StatusOK)
	cancel()
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("nginx: %w\n%s", err, out.Bytes())
	}
	return url, stop, nil
}
