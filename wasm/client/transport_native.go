//go:build !js

package client

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/coder/websocket"

	"github.com/relaywasm/relaywasm/librelay"
)

// DefaultTransport is the Transport an Attachment uses when Options leaves it
// unset: coder/websocket with its default dial options.
var DefaultTransport Transport = &WebSocketTransport{}

// WebSocketTransport dials the relay with github.com/coder/websocket, for Go
// programs and tests outside the browser.
type WebSocketTransport struct {
	// DialOptions are passed to websocket.Dial; Subprotocols is overwritten
	// with the engine's. Use HTTPHeader to present an Origin to a relay that
	// requires one.
	DialOptions websocket.DialOptions
}

// Dial implements Transport.
func (t *WebSocketTransport) Dial(ctx context.Context, url string, protocols []string) (Conn, error) {
	opts := t.DialOptions
	opts.Subprotocols = protocols
	c, _, err := websocket.Dial(ctx, url, &opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(librelay.MaxFrameBytes)
	w := &wsConn{c: c, in: make(chan []byte, 256), done: make(chan struct{})}
	go w.readLoop()
	return w, nil
}

// wsConn reads ahead on its own goroutine, so Read can hand over everything
// that has arrived as one batch, the way the browser's event loop does.
type wsConn struct {
	c       *websocket.Conn
	in      chan []byte
	err     error         // why reading stopped; written before in is closed
	done    chan struct{} // closed by Close
	closing sync.Once
	batch   [][]byte
}

// readLoop stops at Close even while it waits to hand a message over: the
// engine stops reading a connection it has given up on, and a loop blocked
// on a full in would outlive the socket, holding what it had read.
func (w *wsConn) readLoop() {
	defer close(w.in)
	for {
		_, msg, err := w.c.Read(context.Background())
		if err != nil {
			w.err = err
			return
		}
		select {
		case w.in <- msg:
		case <-w.done:
			w.err = net.ErrClosed
			return
		}
	}
}

// Read implements Conn.
func (w *wsConn) Read(ctx context.Context) ([][]byte, error) {
	clear(w.batch)
	w.batch = w.batch[:0]
	select {
	case m, ok := <-w.in:
		if !ok {
			return nil, w.readErr()
		}
		w.batch = append(w.batch, m)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		select {
		case m, ok := <-w.in:
			if !ok {
				return w.batch, nil // the error comes on the next Read
			}
			w.batch = append(w.batch, m)
		default:
			return w.batch, nil
		}
	}
}

func (w *wsConn) readErr() error {
	var ce websocket.CloseError
	if errors.As(w.err, &ce) {
		return &CloseError{Code: int(ce.Code), Reason: ce.Reason}
	}
	return w.err
}

// Write implements Conn.
func (w *wsConn) Write(ctx context.Context, msg []byte) error {
	return w.c.Write(ctx, websocket.MessageText, msg)
}

// Close implements Conn. The close handshake waits for the peer, up to five
// seconds with a dead one, so it runs on its own goroutine: hanging up must
// not hold up the redial. The engine may close a connection twice (at once
// when it breaks during a delivery, and again as it ends); the first close
// says why, so the second has nothing to add.
func (w *wsConn) Close(code int, reason string) error {
	w.closing.Do(func() {
		close(w.done)
		go w.c.Close(websocket.StatusCode(code), reason)
	})
	return nil
}
