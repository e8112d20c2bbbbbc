package builtin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// nginxPage is the body of nginx's default index.html.
const nginxPage = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
<style>
html { color-scheme: light dark; }
body { width: 35em; margin: 0 auto;
font-family: Tahoma, Verdana, Arial, sans-serif; }
</style>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. Further configuration is required.</p>

<p>For online documentation and support please refer to
<a href="http://nginx.org/">nginx.org</a>.<br/>
Commercial support is available at
<a href="http://nginx.com/">nginx.com</a>.</p>

<p><em>Thank you for using nginx.</em></p>
</body>
</html>
`

const nginxNotFound = `<html>
<head><title>404 Not Found</title></head>
<body>
<center><h1>404 Not Found</h1></center>
<hr><center>nginx/1.27.3</center>
</body>
</html>
`

// httpdPage is the body of httpd's default index.html.
const httpdPage = "<html><body><h1>It works!</h1></body></html>\n"

const httpdNotFound = `<!DOCTYPE HTML PUBLIC "-//IETF//DTD HTML 2.0//EN">
<html><head>
<title>404 Not Found</title>
</head><body>
<h1>Not Found</h1>
<p>The requested URL was not found on this server.</p>
</body></html>
`

// webServer serves the image's default site on port 80 and the
// container's declared ports, logging each request as the image does.
func webServer(ctx context.Context, name string, ports []int) error {
	if !slices.Contains(ports, 80) {
		ports = append([]int{80}, ports...)
	}
	server, page, notFound := "nginx/1.27.3", nginxPage, nginxNotFound
	if name == Httpd {
		server, page, notFound = "Apache/2.4.62 (Unix)", httpdPage, httpdNotFound
	}
	pod := hostname()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", server)
		w.Header().Set(PodHeader, pod)
		w.Header().Set("Content-Type", "text/html")
		body, code := page, http.StatusOK
		if r.URL.Path != "/" && r.URL.Path != "/index.html" {
			body, code = notFound, http.StatusNotFound
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(code)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(body))
		}
		accessLog(name, r, code, len(body))
	})
	if name == Nginx {
		fmt.Println("/docker-entrypoint.sh: Configuration complete; ready for start up")
		fmt.Printf("%s [notice] 1#1: nginx/1.27.3\n", time.Now().Format("2006/01/02 15:04:05"))
		fmt.Printf("%s [notice] 1#1: start worker processes\n", time.Now().Format("2006/01/02 15:04:05"))
	} else {
		fmt.Printf("[%s] [mpm_event:notice] [pid 1:tid 1] AH00489: Apache/2.4.62 (Unix) configured -- resuming normal operations\n",
			time.Now().Format("Mon Jan 02 15:04:05.000000 2006"))
	}
	return serve(ctx, ports, h)
}

// accessLog prints the combined (nginx) or common (httpd) log line.
func accessLog(name string, r *http.Request, code, size int) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ts := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	line := fmt.Sprintf("%s - - [%s] \"%s %s %s\" %d %d", host, ts, r.Method, r.RequestURI, r.Proto, code, size)
	if name == Nginx {
		line += fmt.Sprintf(" %q %q %q", orDash(r.Referer()), orDash(r.UserAgent()), "-")
	}
	fmt.Println(line)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
