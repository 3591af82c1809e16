package e2e

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// silencer is a TCP proxy in front of the relay's browser leg whose
// connections can be silenced: from then on nothing crosses them either
// way and neither end is told, a socket dead without a close, as a phone
// that changed networks leaves behind. Unlike an engine's network
// emulation it works in every engine and reaches a worker's sockets too
// (Chromium's emulation of a page does not).
type silencer struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []*silenced
}

// silenced is one proxied connection.
type silenced struct {
	page, relay net.Conn
	quiet       atomic.Bool
}

// newSilencer proxies 127.0.0.1:<a free port> to target until the test ends.
func newSilencer(t *testing.T, target string) *silencer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencer{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// attachURL is the browser leg's URL through the proxy.
func (p *silencer) attachURL() string { return "ws://" + p.ln.Addr().String() + relayleg.AttachPath }

func (p *silencer) accept() {
	for {
		page, err := p.ln.Accept()
		if err != nil {
			return
		}
		relay, err := net.Dial("tcp", p.target)
		if err != nil {
			page.Close()
			continue
		}
		c := &silenced{page: page, relay: relay}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go c.pipe(relay, page)
		go c.pipe(page, relay)
	}
}

// pipe copies src to dst until either ends, and drops what src sends once
// the connection is quiet. A quiet connection is not closed when one end
// goes: the page must find out by itself.
func (c *silenced) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.quiet.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if !c.quiet.Load() {
		c.page.Close()
		c.relay.Close()
	}
}

// silence makes every connection open now quiet; later ones are proxied.
// It returns how many it silenced.
func (p *silencer) silence() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.quiet.Store(true)
	}
	return len(p.conns)
}

func (p *silencer) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.page.Close()
		c.relay.Close()
	}
}

// withParam adds key=value to u's query.
func withParam(u, key, value string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + key + "=" + url.QueryEscape(value)
}
