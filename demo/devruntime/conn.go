package devruntime

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// agentName is what this runtime calls itself in its hello.
const agentName = "relaywasm-dev-runtime/1"

// conn is one welcomed connection to the relay. Every frame to the relay goes
// through out, drained by one writer goroutine that flushes when out runs
// empty, so a burst of frames costs one syscall rather than one each.
type conn struct {
	nc     net.Conn
	out    chan []byte
	done   chan struct{}
	once   sync.Once
	active atomic.Bool // a frame arrived since the heartbeat last looked
	hbSeq  int
}

func newConn(nc net.Conn) *conn {
	return &conn{nc: nc, out: make(chan []byte, 256), done: make(chan struct{})}
}

// send queues a line, blocking while the queue is full: that is the relay's
// backpressure reaching the agent. It gives up once the connection is gone.
func (c *conn) send(line []byte) {
	select {
	case c.out <- line:
	case <-c.done:
	}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

// writeLoop drains out onto the socket until the connection ends.
func (c *conn) writeLoop() {
	defer c.close()
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case line := <-c.out:
			if _, err := bw.Write(line); err != nil {
				return
			}
			if len(c.out) == 0 {
				if err := bw.Flush(); err != nil {
					return
				}
			}
		case <-c.done:
			return
		}
	}
}

// connectOnce dials, shakes hands and serves one connection until it ends.
// welcomed reports whether the relay accepted this runtime, retryAfter is the
// welcome's redial hint.
func (r *Runtime) connectOnce(ctx context.Context) (welcomed bool, retryAfter int, err error) {
	nc, br, err := r.dial(ctx)
	if err != nil {
		return false, 0, err
	}
	c := newConn(nc)
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	defer c.close()
	rd := librelay.NewReader(br)
	w, err := r.handshake(c, rd)
	if err != nil {
		return false, 0, err
	}
	r.log.Info("connected to relay", "relay", w.Relay, "version", w.ProtocolVersion)
	go c.writeLoop()
	go r.heartbeat(c)
	r.setConn(c)
	defer r.setConn(nil)
	return true, w.RetryAfterSeconds, r.readLoop(c, rd)
}

// dial opens the transport and performs the HTTP upgrade. The returned reader
// holds whatever the relay sent after its 101.
func (r *Runtime) dial(ctx context.Context) (net.Conn, *bufio.Reader, error) {
	u, _ := connectURL(r.cfg.Relay)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.HandshakeTimeout)
	defer cancel()
	nc, err := r.dialTransport(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	br, err := upgrade(nc, u, r.cfg.Credential)
	if err == nil && !stop() {
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, br, nil
}

func (r *Runtime) dialTransport(ctx context.Context, u *url.URL) (net.Conn, error) {
	if u.Scheme == "https" {
		d := tls.Dialer{Config: r.cfg.TLS}
		return d.DialContext(ctx, "tcp", hostPort(u, "443"))
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", hostPort(u, "80"))
}

// upgrade asks for the runtime leg and checks the relay switched to it.
func upgrade(nc net.Conn, u *url.URL, credential string) (*bufio.Reader, error) {
	req := &http.Request{
		Method: http.MethodGet, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Connection":    {"Upgrade"},
			"Upgrade":       {relayleg.UpgradeToken},
			"Authorization": {"Bearer " + credential},
		},
	}
	if err := req.Write(nc); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: HTTP %d", ErrUnauthorized, resp.StatusCode)
	case resp.StatusCode != http.StatusSwitchingProtocols:
		return nil, fmt.Errorf("runtime: relay answered the upgrade with HTTP %d", resp.StatusCode)
	case !strings.EqualFold(resp.Header.Get("Upgrade"), relayleg.UpgradeToken):
		return nil, fmt.Errorf("runtime: relay upgraded to %q", resp.Header.Get("Upgrade"))
	}
	return br, nil
}

// handshake sends relay.hello with a fresh nonce and verifies the welcome
// against the pinned key. A refusal that dialling again cannot fix is fatal.
func (r *Runtime) handshake(c *conn, rd *librelay.Reader) (librelay.Welcome, error) {
	var w librelay.Welcome
	nonce, err := librelay.NewNonce()
	if err != nil {
		return w, err
	}
	payload, _ := librelay.Hello{
		ProtocolVersion: librelay.ProtocolVersion, Instance: r.cfg.Instance, Agent: agentName, Nonce: nonce,
	}.MarshalJSON()
	hello := librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: r.cfg.Instance, Payload: payload}
	line, err := appendLine(nil, &hello)
	if err != nil {
		return w, err
	}
	c.nc.SetDeadline(time.Now().Add(r.cfg.HandshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	if _, err := c.nc.Write(line); err != nil {
		return w, err
	}
	f, err := rd.ReadFrame()
	if err != nil {
		return w, err
	}
	if err := welcomeOf(f, hello.ID, &w); err != nil {
		return w, err
	}
	if w.ProtocolVersion < 1 || w.ProtocolVersion > librelay.ProtocolVersion {
		return w, fmt.Errorf("%w: selected protocol version %d", ErrBadRelay, w.ProtocolVersion)
	}
	if err := librelay.VerifyWelcome(r.cfg.RelayKey, nonce, w.ProtocolVersion, r.cfg.Instance, w.Signature); err != nil {
		return w, errors.Join(ErrBadRelay, err)
	}
	return w, nil
}

// welcomeOf reads the relay's answer to the hello into w, or the refusal.
func welcomeOf(f librelay.Frame, helloID string, w *librelay.Welcome) error {
	if f.ReplyTo != helloID {
		return fmt.Errorf("runtime: relay sent %s before answering hello", f.Type)
	}
	switch f.Type {
	case librelay.TypeWelcome:
		return w.UnmarshalJSON(f.Payload)
	case librelay.TypeError:
		var e librelay.Error
		_ = e.UnmarshalJSON(f.Payload)
		return refusal(e)
	}
	return fmt.Errorf("runtime: relay answered hello with %s", f.Type)
}

// refusal maps a relay.error code to the error Run acts on.
func refusal(e librelay.Error) error {
	err := fmt.Errorf("runtime: relay error %s: %s", e.Code, e.Message)
	switch e.Code {
	case relayleg.CodeUnauthorized:
		return errors.Join(ErrUnauthorized, err)
	case librelay.CodeVersion:
		return errors.Join(ErrBadRelay, err)
	case relayleg.CodeSuperseded:
		return errors.Join(ErrSuperseded, err)
	}
	return err
}

// connectURL resolves the relay base URL to the runtime leg's URL.
func connectURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "http"
	case "https", "wss":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("runtime: relay URL scheme %q is not http, https, ws or wss", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("runtime: relay URL has no host")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + relayleg.ConnectPath
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u, nil
}

func hostPort(u *url.URL, defPort string) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), defPort)
}

// heartbeat probes a relay that has been silent for HeartbeatInterval and
// drops the connection when the probe goes unanswered for HeartbeatTimeout.
// Any frame from the relay counts as an answer.
func (r *Runtime) heartbeat(c *conn) {
	tick := min(r.cfg.HeartbeatInterval, r.cfg.HeartbeatTimeout) / 4
	t := time.NewTicker(max(tick, 5*time.Millisecond))
	defer t.Stop()
	idleSince, probed := time.Now(), time.Time{}
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			if c.active.Swap(false) {
				idleSince, probed = now, time.Time{}
				continue
			}
			switch {
			case !probed.IsZero() && now.Sub(probed) >= r.cfg.HeartbeatTimeout:
				r.log.Warn("relay missed a heartbeat; dropping the connection")
				c.close()
				return
			case probed.IsZero() && now.Sub(idleSince) >= r.cfg.HeartbeatInterval:
				probed = now
				c.hbSeq++
				r.sendOn(c, librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb-" + strconv.Itoa(c.hbSeq)})
			}
		}
	}
}

// sendOn encodes f and queues it on c specifically (heartbeats belong to a
// connection, not to whichever is live).
func (r *Runtime) sendOn(c *conn, f librelay.Frame) {
	if line, err := appendLine(nil, &f); err == nil {
		c.send(line)
	}
}
