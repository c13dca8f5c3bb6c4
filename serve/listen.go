package serve

import (
	"fmt"
	"net"
	"strings"
)

// CheckListen refuses to serve on addr (host:port) when the host is not a
// loopback address unless the daemon has both a token that was given to
// it (not generated) and TLS, or insecure is set: an API that runs
// commands must not be reachable from the network in the clear or with a
// token nobody chose.
func CheckListen(addr string, tokenGiven, tls, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w (want HOST:PORT, e.g. 127.0.0.1:7070)", addr, err)
	}
	if insecure || isLoopback(host) || tokenGiven && tls {
		return nil
	}
	var missing []string
	if !tokenGiven {
		missing = append(missing, "a token (--token-file FILE or AGENTFS_TOKEN)")
	}
	if !tls {
		missing = append(missing, "TLS (--tls-cert FILE --tls-key FILE)")
	}
	return fmt.Errorf("refusing to listen on %s, which is not a loopback address, without %s: anyone who reaches it could run commands; pass them, listen on 127.0.0.1, or pass --insecure if something else (a proxy, a private network) protects it",
		addr, strings.Join(missing, " and "))
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
