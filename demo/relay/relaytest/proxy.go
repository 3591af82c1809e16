package relaytest

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP hop between a peer and a relay, as a load balancer or a
// phone's network is, that a test can break: Cut drops the connections
// through it, Freeze holds their bytes and new dials without closing
// anything (a half-open socket), Down refuses new ones, and Repoint sends new
// ones to another relay node or a restarted relay. It forwards bytes and
// knows nothing of what they mean, except, with RecordLines, where the
// peer's lines end.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	frozen   bool
	muted    bool
	down     bool
	conns    map[net.Conn]struct{}
	thaw     chan struct{} // closed by Thaw
	accepted int

	record bool          // RecordLines
	lines  []string      // the peers' lines passed on, in the order they went
	more   chan struct{} // closed when a line is added to lines
}

// ProxyOption is an option of NewProxy.
type ProxyOption func(*Proxy)

// RecordLines has the proxy keep every line a peer sends through it (the
// bytes from the side that dials, up to and with each newline), once it
// has passed the line on (or dropped it, muted: Mute): a runtime's leg is an HTTP upgrade and then one
// JSON frame a line, so a test can wait until the runtime has sent
// something nothing else shows it, such as a response that goes to a page
// that is offline and is lost (Lines, WaitLine). Bytes after a peer's last
// newline are not kept.
func RecordLines() ProxyOption { return func(p *Proxy) { p.record = true } }

// NewProxy listens on a loopback port and forwards each connection to
// upstream (host:port). The test's cleanup closes it, cuts what is left
// and lets go of what a freeze still holds.
func NewProxy(t testing.TB, upstream string, opts ...ProxyOption) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}, thaw: make(chan struct{}), more: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut(); p.Thaw() })
	return p
}

// Addr is the host:port peers dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted counts the connections the proxy has taken: one per dial.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(down net.Conn) {
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
	var keep func([]byte)
	if p.record {
		keep = p.lineKeeper()
	}
	go p.copy(up, down, keep, true)
	p.copy(down, up, nil, false)
}

// lineKeeper returns what keeps the lines of one connection's peer,
// given the bytes in the order they were passed on.
func (p *Proxy) lineKeeper() func([]byte) {
	var part []byte
	return func(b []byte) {
		part = append(part, b...)
		for {
			i := bytes.IndexByte(part, '\n')
			if i < 0 {
				return
			}
			p.mu.Lock()
			p.lines = append(p.lines, string(part[:i+1]))
			close(p.more)
			p.more = make(chan struct{})
			p.mu.Unlock()
			part = part[i+1:]
		}
	}
}

// Lines returns the lines recorded so far (RecordLines), oldest first.
func (p *Proxy) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLine waits until a recorded line (RecordLines) holds word, and says
// whether one did before timeout.
func (p *Proxy) WaitLine(word string, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for seen := 0; ; {
		p.mu.Lock()
		lines, more := p.lines[seen:], p.more
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, word) {
				return true
			}
		}
		select {
		case <-more:
		case <-deadline.C:
			return false
		}
	}
}

// track notes the two ends of a connection so Cut can close them, or closes
// them at once when the proxy is down. A frozen proxy takes the connection
// and holds its bytes, as a network that went silent holds a dial: closing
// it would tell the peer what a silent network never tells.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
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

// copy moves bytes from src to dst, holding them while the proxy is frozen,
// until either side ends; then it closes and forgets both. An end while
// frozen is held as bytes are: a relay that gives up on a peer behind a
// frozen network closes a socket whose close never reaches the peer. keep,
// if not nil, gets the bytes once they are written. Bytes from the peer
// (fromPeer) are dropped instead while the proxy is muted.
func (p *Proxy) copy(dst, src net.Conn, keep func([]byte), fromPeer bool) {
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitThaw()
			dropped := fromPeer && p.isMuted() // as on a network failing one way
			if !dropped {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if keep != nil {
				keep(buf[:n])
			}
		}
		if err != nil {
			p.waitThaw()
			return
		}
	}
}

func (p *Proxy) waitThaw() {
	p.mu.Lock()
	frozen, thaw := p.frozen, p.thaw
	p.mu.Unlock()
	if frozen {
		<-thaw
	}
}

// Cut closes every connection through the proxy at once, as a dropped
// network would; new dials go through as before, unmuted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.muted = false
}

// Mute drops what the peers send instead of passing it on, while what
// upstream sends them still flows: a runtime's frames lost on the way to
// the relay, on a connection neither end knows is failing. The stream of
// bytes upstream reads is cut short, so a test ends the mute with Cut.
// RecordLines still keeps the peers' lines.
func (p *Proxy) Mute() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.muted = true
}

func (p *Proxy) isMuted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.muted
}

// Freeze stops all traffic without closing anything: bytes, ends and new
// connections alike wait for Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw lets held traffic flow again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
		p.thaw = make(chan struct{})
	}
}

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Cut()
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Repoint sends the connections dialled from now on to upstream; those
// already open stay where they are until they end or are Cut.
func (p *Proxy) Repoint(upstream string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = upstream
}
