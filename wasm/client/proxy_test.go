//go:build !js

package client_test

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP hop between a peer and the relay that a test can cut,
// freeze (a half-open socket: nothing flows, nothing closes) or re-point at a
// restarted relay. It forwards bytes and knows nothing of what they mean.
type proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	frozen   bool
	down     bool
	conns    map[net.Conn]struct{}
	thaw     chan struct{}
	accepted int
}

func newProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}, thaw: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// Accepted counts the connections the proxy has taken: one per dial.
func (p *proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(down net.Conn) {
	p.mu.Lock()
	p.accepted++
	upstream := p.upstream
	p.mu.Unlock()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		down.Close()
		return
	}
	if !p.track(down, up) {
		return
	}
	go p.copy(up, down)
	p.copy(down, up)
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen || p.down { // a frozen or downed network takes no new connections
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// copy moves bytes from src to dst, holding them while the proxy is frozen.
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitThaw()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *proxy) waitThaw() {
	p.mu.Lock()
	frozen, thaw := p.frozen, p.thaw
	p.mu.Unlock()
	if frozen {
		<-thaw
	}
}

// Cut closes every connection through the proxy at once, as a dropped
// network would; new dials go through as before.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Freeze stops all traffic without closing anything.
func (p *proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw lets held traffic flow again.
func (p *proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
		p.thaw = make(chan struct{})
	}
}

// Down cuts every connection and refuses new ones until Up.
func (p *proxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Cut()
}

// Up lets connections through again.
func (p *proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Repoint sends new connections to upstream and cuts the old ones.
func (p *proxy) Repoint(upstream string) {
	p.mu.Lock()
	p.upstream = upstream
	p.mu.Unlock()
	p.Cut()
}
