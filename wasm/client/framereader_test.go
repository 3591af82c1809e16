//go:build !js

package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A Conn that parses frames itself (client.FrameReader) is read through
// ReadFrames only, and the Payload it gives an acp.message reaches
// OnMessages as it is: here a token standing for the payload, as
// jsbridge's transport hands one, which the handler turns back into the
// message. The stream arrives whole and in order all the same.
func TestFrameReaderIsUsed(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	tr := &tokenTransport{inner: client.DefaultTransport}
	o := s.options(client.NewMemoryStore(), c)
	o.History = 0 // tokens stand for payloads only when no transcript is kept
	o.Transport = tr
	o.OnMessage = nil
	o.OnMessages = onMessagesVia(t, c, func(m client.Message) ([]byte, error) {
		if p, ok := tr.payload(m.Payload); ok {
			return p, nil
		}
		return nil, fmt.Errorf("message seq %d reached OnMessages without its token: %q", m.Seq, m.Payload)
	})
	a := s.attach(o)
	session := startChat(t, c, a)
	call(t, c, a, 3, "session/prompt", promptParams(session, "count 300"))
	msgs := c.Snapshot()
	checkSeqs(t, msgs, 1, msgs[len(msgs)-1].Seq)
	checkCount(t, chunks(msgs), 300)
	if n := tr.reads.Load(); n != 0 {
		t.Fatalf("Read was called %d times on a FrameReader", n)
	}
	if tr.frameReads.Load() == 0 {
		t.Fatal("ReadFrames was never called")
	}
}

// onMessagesVia is c's OnMessages for a transport whose frames stand for
// their payloads: payload finds a message's, and a message whose payload it
// cannot find fails the test (and is refused).
func onMessagesVia(t *testing.T, c *clienttest.Collector, payload func(client.Message) ([]byte, error)) func(context.Context, []client.Message) (int, error) {
	return func(_ context.Context, batch []client.Message) (int, error) {
		for i, m := range batch {
			p, err := payload(m)
			if err != nil {
				t.Error(err)
				return i, err
			}
			m.Payload = p
			if err := c.OnMessage(m); err != nil {
				return i, err
			}
		}
		return len(batch), nil
	}
}

// tokenTransport dials with inner and wraps each Conn in a tokenConn.
type tokenTransport struct {
	inner             client.Transport
	reads, frameReads atomic.Int64

	mu       sync.Mutex
	payloads [][]byte // by token
}

func (tr *tokenTransport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	c, err := tr.inner.Dial(ctx, url, protocols)
	if err != nil {
		return nil, err
	}
	return &tokenConn{Conn: c, tr: tr}, nil
}

// token keeps payload and returns the bytes that stand for it: a zero byte
// (no JSON text starts with one) and the payload's number.
func (tr *tokenTransport) token(payload []byte) []byte {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.payloads = append(tr.payloads, payload)
	return binary.LittleEndian.AppendUint32([]byte{0}, uint32(len(tr.payloads)-1))
}

func (tr *tokenTransport) payload(token []byte) ([]byte, bool) {
	if len(token) != 5 || token[0] != 0 {
		return nil, false
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	i := int(binary.LittleEndian.Uint32(token[1:]))
	if i >= len(tr.payloads) {
		return nil, false
	}
	return tr.payloads[i], true
}

type tokenConn struct {
	client.Conn
	tr *tokenTransport
}

func (c *tokenConn) Read(ctx context.Context) ([][]byte, error) {
	c.tr.reads.Add(1)
	return nil, errors.New("Read called on a FrameReader")
}

func (c *tokenConn) ReadFrames(ctx context.Context) ([]librelay.Frame, error) {
	c.tr.frameReads.Add(1)
	msgs, err := c.Conn.Read(ctx)
	var frames []librelay.Frame
	for _, m := range msgs {
		f, perr := librelay.ParseFrame(m)
		if perr != nil {
			continue
		}
		if f.Type == librelay.TypeACPMessage {
			f.Payload = c.tr.token(f.Payload)
		}
		frames = append(frames, f)
	}
	return frames, err
}
