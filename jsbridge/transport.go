//go:build js && wasm

package jsbridge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// Transport is a client.Transport on the page's own WebSocket.
//
// It exists because coder/websocket's browser build reports every close as
// net.ErrClosed (no code, no reason) and can drop a message that arrived just
// before the close; the client engine needs both to tell a refusal it must not
// retry from a drop it should. Here relay.js owns the socket's event handlers,
// flushes its queue of messages into Go before it reports the close, and
// passes the close code and reason along.
type Transport struct{}

// Sentinel errors of a browser socket. A close the relay sent with a close
// frame is a *client.CloseError instead.
var (
	// ErrDialFailed: the socket closed before it opened. Browsers do not say
	// why (a refused connection, a failed TLS handshake and an HTTP 403 for
	// the Origin all look alike to script; so does WebKit's refusal of a
	// ws:// URL to this machine from an https: page, which relay.js lets
	// through since Chromium and Firefox allow it).
	ErrDialFailed = errors.New("jsbridge: the WebSocket closed before it opened (browsers do not say why: nothing listening there, another path, an Origin the relay refuses, a failed TLS handshake, or, in WebKit, ws:// from an https: page)")
	// ErrConnectionLost: the connection ended without a close frame (close
	// code 1006, or 1015 for a TLS failure), e.g. the network went away.
	ErrConnectionLost = errors.New("jsbridge: the WebSocket connection was lost")
	// ErrClosedLocally: this side closed the socket (Conn.Close).
	ErrClosedLocally = errors.New("jsbridge: the WebSocket was closed by this client")
)

// Dial implements client.Transport.
func (Transport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	return dial(ctx, url, protocols, boundary.ModeText, 0)
}

// dial opens a socket whose messages relay.js hands over in mode
// (boundary.ModeText: as they arrived, for Go code with its own OnMessage;
// ModeParse, ModeParseKeep and ModeParseHold: parsed by relay.js, for the
// JavaScript API; in ModeParseHold relay.js holds the payloads for the
// attachment whose handle is att).
func dial(ctx context.Context, url string, protocols []string, mode, att int) (*conn, error) {
	b, err := theBridge()
	if err != nil {
		return nil, err
	}
	protos := make([]any, len(protocols))
	for i, p := range protocols {
		protos[i] = p
	}
	c := &conn{bridge: b, url: url, opened: make(chan error, 1), wake: make(chan struct{}, 1)}
	// Register before dialling: no event can arrive before dial returns (the
	// page has one thread), but the handle is only known after it.
	sockets.mu.Lock()
	h, err := call(b, "dial", url, protos, mode, att)
	if err != nil {
		sockets.mu.Unlock()
		// relay.js refused the URL: one the page may not open (a secure
		// page's ws://, one its Content-Security-Policy refused before).
		// No redial would be let through, so the attachment ends. (When
		// WebSocket's constructor throws, relay.js closes the socket
		// unopened with the exception's name and message: dialFailed.)
		return nil, refused(url, err)
	}
	c.handle = jsInt(h)
	sockets.m[c.handle] = c
	sockets.mu.Unlock()

	select {
	case err := <-c.opened:
		if err != nil {
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		_, _ = call(b, "close", c.handle, 1000, "")
		return nil, ctx.Err()
	}
}

// sockets routes events from relay.js's shared callbacks to their conn.
var sockets = struct {
	mu sync.Mutex
	m  map[int]*conn
}{m: make(map[int]*conn)}

func socketByHandle(h int) *conn {
	sockets.mu.Lock()
	defer sockets.mu.Unlock()
	return sockets.m[h]
}

// conn is one browser WebSocket. relay.js packs the messages of each flush
// as records (frames.go) that are appended to pending as they come; a read
// takes the whole of pending at once, swapping buffers so neither the
// callback nor the read allocates in the steady state.
type conn struct {
	bridge Value
	url    string // dialled
	handle int
	opened chan error    // the outcome of the dial, sent once
	wake   chan struct{} // the reader's doorbell, never blocks the sender

	mu      sync.Mutex
	isOpen  bool
	pending []byte // records not yet read
	recs    int    // how many records pending holds, as relay.js counted them
	spare   []byte // the buffer the previous read returned, reused next
	err     error  // why the socket ended; reported once pending is empty

	msgs [][]byte   // Read's result, reused
	dec  recDecoder // ReadFrames's, across batches
}

// Read implements client.Conn.
func (c *conn) Read(ctx context.Context) ([][]byte, error) {
	batch, _, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	return c.split(batch), nil
}

// next waits for records and returns all of them and their number (0 when
// relay.js did not say), or why the socket ended once none is left. The
// bytes are valid until the next call.
func (c *conn) next(ctx context.Context) ([]byte, int, error) {
	for {
		c.mu.Lock()
		if len(c.pending) > 0 {
			batch, recs := c.pending, c.recs
			c.pending, c.spare, c.recs = c.spare[:0], batch, 0
			c.mu.Unlock()
			return batch, recs, nil
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return nil, 0, err
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// split cuts a batch of text records (all a socket in modeText gets) into
// its messages, in place.
func (c *conn) split(batch []byte) [][]byte {
	c.msgs = c.msgs[:0]
	for len(batch) > 0 {
		var msg []byte
		var ok bool
		if batch[0] != boundary.RecText {
			break // cannot happen: relay.js writes only text records in modeText
		}
		if msg, batch, ok = cut(batch[1:]); !ok {
			break
		}
		c.msgs = append(c.msgs, msg)
	}
	return c.msgs
}

// Write implements client.Conn. The message leaves as a JavaScript string,
// which is what WebSocket.send needs for a text message.
func (c *conn) Write(ctx context.Context, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return errors.Join(client.ErrNotSent, err)
	}
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return errors.Join(client.ErrNotSent, err)
	}
	// The bytes go through the out buffer; relay.js decodes them into the
	// string WebSocket.send needs for a text message.
	sent, err := withOut(msg, "send", c.handle, len(msg))
	if err != nil {
		return err
	}
	if !jsBool(sent) {
		return client.ErrNotSent
	}
	return nil
}

// Close implements client.Conn. Read stops at once with ErrClosedLocally
// (after the messages already received) instead of waiting for the relay to
// answer the close, which a half-open connection never does.
func (c *conn) Close(code int, reason string) error {
	if _, err := call(c.bridge, "close", c.handle, code, reason); err != nil {
		return err
	}
	c.end(ErrClosedLocally)
	return nil
}

// end records why the socket ended, keeping the first reason, and wakes Read.
func (c *conn) end(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.ring()
}

func (c *conn) ring() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// onFrames receives one flushed batch from relay.js: (handle, byte length,
// the in buffer when new or null, the number of records). It copies the
// bytes and returns; it must never block.
func onFrames(args []Value) any {
	if len(args) < 3 {
		return nil
	}
	c := socketByHandle(jsInt(args[0]))
	n := jsInt(args[1])
	if c == nil || n <= 0 {
		// Still take a new buffer: the next call will not pass it again.
		_, _ = readIn(nil, 0, args[2])
		return nil
	}
	c.mu.Lock()
	var err error
	c.pending, err = readIn(c.pending, n, args[2])
	if err != nil && c.err == nil {
		c.err = err
	}
	if err == nil {
		c.recs += jsInt(arg(args, 3))
	}
	c.mu.Unlock()
	c.ring()
	return nil
}

// onSocket receives a socket's open and close events: (handle, kind, code,
// text), text being the selected subprotocol or the close reason.
func onSocket(args []Value) any {
	if len(args) < 4 {
		return nil
	}
	h := jsInt(args[0])
	c := socketByHandle(h)
	if c == nil {
		return nil
	}
	switch jsInt(args[1]) {
	case boundary.SocketOpen:
		c.mu.Lock()
		c.isOpen = true
		c.mu.Unlock()
		c.opened <- nil
	case boundary.SocketClose:
		sockets.mu.Lock()
		delete(sockets.m, h)
		sockets.mu.Unlock()
		c.mu.Lock()
		wasOpen := c.isOpen
		c.mu.Unlock()
		if !wasOpen {
			c.opened <- dialFailed(c.url, jsString(args[3]))
			return nil
		}
		c.end(closeError(jsInt(args[2]), jsString(args[3])))
	}
	return nil
}

// dialFailed is why a socket closed before it opened: ErrDialFailed, or,
// when relay.js gave the close a reason (a failed connection's close has
// none), the browser refused it: the page's Content-Security-Policy, or
// WebSocket's constructor threw (a URL it does not take, a blocked port;
// relay.js reports it a turn later, with the exception's name, so that a
// policy's violation event is heard first). No redial would be let through.
func dialFailed(url, reason string) error {
	if reason == "" {
		return ErrDialFailed
	}
	return refused(url, errors.New(reason))
}

// refused is the error of a dial to url the browser refused, for why.
func refused(url string, why error) error {
	return fmt.Errorf("%w: the browser will not open a WebSocket to %q: %w", client.ErrBadOptions, url, why)
}

// closeError is what Read reports for a close event's code and reason.
func closeError(code int, reason string) error {
	switch code {
	case 1006, 1015: // no close frame arrived: the connection was lost
		return ErrConnectionLost
	}
	return &client.CloseError{Code: code, Reason: reason}
}
