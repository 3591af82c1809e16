package relay

import (
	"net"
	"net/netip"
	"path"
	"strings"
)

// hosts is the set of names the browser leg answers to. A page whose name
// was rebound (DNS rebinding) to the relay's address sends its own name as
// both Host and Origin, and an Origin check alone admits an Origin that
// equals the Host; checking Host against the names the relay serves is what
// refuses it. Loopback names are always served: browsers resolve localhost
// and *.localhost to loopback themselves, and a rebound name is not a
// loopback name.
type hosts struct{ patterns []string }

// newHosts takes Config.Hosts: host names or patterns (path.Match syntax,
// "*.example.com"), each with or without a port; without one it matches any
// port.
func newHosts(patterns []string) hosts {
	out := make([]string, 0, len(patterns))
	for _, p := range patterns {
		if p = strings.ToLower(strings.TrimSpace(p)); p != "" {
			out = append(out, p)
		}
	}
	return hosts{patterns: out}
}

// with adds the names of a listen address (host:port): its host, or, when
// it is unspecified (":8080", "0.0.0.0:8080"), every address of the
// machine's interfaces, since any of them reaches it.
func (h hosts) with(listen string) hosts {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return h
	}
	if ip, err := netip.ParseAddr(host); host != "" && (err != nil || !ip.IsUnspecified()) {
		return hosts{patterns: append(h.patterns, strings.ToLower(host))}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			h.patterns = append(h.patterns, n.IP.String())
		}
	}
	return h
}

// allows reports whether a request's Host is one the relay serves.
func (h hosts) allows(hostport string) bool {
	hostport = strings.ToLower(hostport)
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.Trim(host, "[]")
	if isLoopback(host) {
		return true
	}
	for _, p := range h.patterns {
		target := host
		if _, _, err := net.SplitHostPort(p); err == nil {
			target = hostport
		}
		if ok, _ := path.Match(strings.Trim(p, "[]"), target); ok {
			return true
		}
	}
	return false
}

func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
