//go:build js && wasm

package jsbridge

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// The inbound hot path of the JavaScript API. The application needs every
// message as an object, so the page parses it with JSON.parse whatever Go
// does; Go's own scan of the same frame, compiled to WebAssembly, cost about
// 8 µs per 1 KiB frame here (librelay.ParseFrame under Chromium, against
// 2 µs natively), which was most of what relay.wasm added per frame to
// what a bare WebSocket costs the page. So relay.js parses each message once,
// at the flush, and hands Go only the envelope of an acp.message (type, seq,
// routing fields: what the engine decides on), keeping the parsed object;
// Go scans in full only what it must read: relay.* control frames,
// session.resumed, and frames JSON.parse refused. When a transcript is kept
// an acp.message comes with its payload's text too, cut out of the message
// by relay.js (payloadText), which Go keeps without scanning: JSON.parse
// checked it. The engine delivers as always, and deliver hands
// relay.js back, per message, which of its objects to pass to onMessage.
// The payload is parsed exactly once, by JSON.parse, and never encoded
// again.
//
// A flushed batch is a sequence of records, little-endian:
//
//	recText     [0][u32 n][n bytes]                  a message as it arrived
//	recACP      [1][f64 index][f64 seq][field × 5]   an acp.message JSON.parse read
//	recACPText  [2][f64 index][u32 n][n bytes]       one relay.js parsed too, as it arrived
//	recACPKeep  [3][as recACP][u32 n][n bytes]       recACP and its payload's text
//
// index numbers the socket's parsed messages (relay.js keeps them by it);
// seq is a safe integer (relay.js sends anything else as text). The one
// frame read differently than Go's codec would is one whose seq is written
// as a number that is not an integer literal ("seq": 2.0): JSON.parse reads
// the number it is, Go's codec refuses it. The fields
// are instance, session, id, re and trace, each [u32 n][n bytes] or
// [sameField] for the value of the socket's previous recACP: a stream
// repeats its instance and session on every frame.
const (
	recText    = 0
	recACP     = 1
	recACPText = 2
	recACPKeep = 3
	sameField  = math.MaxUint32
)

// A mark says that the acp.message whose payload starts at p stands for
// relay.js's parsed message index: its payload is a token (recACP) or the
// payload bytes themselves (recACPText, recACPKeep). deliver finds a message's mark by
// the payload's address, which the engine hands on unchanged.
type mark struct {
	p     *byte
	index float64
}

// frameConn is the socket of an attachment made through the JavaScript
// API: a client.FrameReader, so the engine takes the frames relay.js parsed
// instead of parsing messages itself.
type frameConn struct{ *conn }

// errReadFrames: a frameConn's messages are records only ReadFrames reads.
var errReadFrames = errors.New("jsbridge: this socket is read with ReadFrames")

// Read implements client.Conn; the engine reads a FrameReader with
// ReadFrames only.
func (c frameConn) Read(context.Context) ([][]byte, error) { return nil, errReadFrames }

// ReadFrames implements client.FrameReader.
func (c frameConn) ReadFrames(ctx context.Context) ([]librelay.Frame, error) {
	batch, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	frames, marks := c.dec.decode(batch)
	if len(marks) > 0 {
		c.mu.Lock()
		c.marks = append(c.marks, marks...)
		c.mu.Unlock()
	}
	return frames, nil
}

// take finds the mark of a delivered message's payload, and forgets it and
// every older one: the engine delivers a socket's messages in the order they
// arrived, so a message marked before one being delivered will never be.
func (c *conn) take(payload []byte) (index float64, ok bool) {
	if c == nil || len(payload) == 0 {
		return 0, false
	}
	p := unsafe.SliceData(payload)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.marks {
		if m.p == p {
			clear(c.marks[:i+1]) // let the payloads go
			c.marks = c.marks[i+1:]
			return m.index, true
		}
	}
	return 0, false
}

// recDecoder turns records into frames. It keeps the previous recACP's
// fields, which the next one may repeat by sameField.
type recDecoder struct {
	prev      [5]string // instance, session, id, re, trace
	prevValid bool      // the previous recACP's frame passed Validate
}

// decode returns the frames of a batch and the marks of the acp.messages
// among them. Nothing returned aliases batch. A message that is not a valid
// frame is left out, as the engine drops one that does not parse.
func (d *recDecoder) decode(batch []byte) (frames []librelay.Frame, marks []mark) {
	frames = make([]librelay.Frame, 0, 1+len(batch)/256)
	var tokens []byte // one byte per recACP: its payload, unique by address
	var kept []byte   // the payloads of recACPKeep, one after the other
	for len(batch) > 0 {
		kind := batch[0]
		batch = batch[1:]
		var index float64
		if kind != recText {
			if len(batch) < 8 {
				return frames, marks
			}
			index = math.Float64frombits(binary.LittleEndian.Uint64(batch))
			batch = batch[8:]
		}
		var f librelay.Frame
		var ok bool
		switch kind {
		case recText, recACPText:
			var msg []byte
			if msg, batch, ok = cut(batch); !ok {
				return frames, marks
			}
			var err error
			if f, err = librelay.ParseFrame(msg); err != nil {
				continue
			}
		case recACP, recACPKeep:
			if f, batch, ok = d.envelope(batch); !ok {
				return frames, marks
			}
			var payload []byte
			if kind == recACPKeep {
				if payload, batch, ok = cut(batch); !ok {
					return frames, marks
				}
			}
			if !d.prevValid {
				continue
			}
			if kind == recACPKeep {
				if kept == nil {
					kept = make([]byte, 0, len(batch)+len(payload)) // every payload left fits
				}
				kept = append(kept, payload...)
				f.Payload = kept[len(kept)-len(payload) : len(kept) : len(kept)]
				break
			}
			if len(tokens) == cap(tokens) {
				tokens = make([]byte, 0, max(16, 2*cap(tokens)))
			}
			tokens = append(tokens, 0)
			f.Payload = tokens[len(tokens)-1 : len(tokens) : len(tokens)]
		default:
			return frames, marks // cannot happen: relay.js writes only the kinds above
		}
		if kind != recText && f.Type == librelay.TypeACPMessage && len(f.Payload) > 0 {
			marks = append(marks, mark{p: unsafe.SliceData(f.Payload), index: index})
		}
		frames = append(frames, f)
	}
	return frames, marks
}

// envelope reads a recACP after its index: the frame, with no payload yet.
func (d *recDecoder) envelope(b []byte) (f librelay.Frame, rest []byte, ok bool) {
	if len(b) < 8 {
		return f, nil, false
	}
	f.Type = librelay.TypeACPMessage
	f.Seq = uint64(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	b = b[8:]
	same := true
	for i := range d.prev {
		if len(b) < 4 {
			return f, nil, false
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if n == sameField {
			continue
		}
		if uint64(n) > uint64(len(b)) {
			return f, nil, false
		}
		same = false
		d.prev[i] = string(b[:n])
		b = b[n:]
	}
	f.Instance, f.Session, f.ID, f.ReplyTo, f.Trace = d.prev[0], d.prev[1], d.prev[2], d.prev[3], d.prev[4]
	// The same fields as a frame that passed need not be checked again.
	if !same || !d.prevValid {
		d.prevValid = f.Validate() == nil
	}
	return f, b, true
}

// cut reads [u32 n][n bytes] from the start of b.
func cut(b []byte) (msg, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n:n], b[n:], true
}

// apiTransport is the Transport of an attachment made through the
// JavaScript API: its sockets are frameConns, and the attachment's deliver
// looks the delivered messages up on the current one.
type apiTransport struct {
	a    *attachment
	keep bool // a transcript is kept: relay.js hands the payloads' text over too
}

// Dial implements client.Transport.
func (t apiTransport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	mode := modeParse
	if t.keep {
		mode = modeParseKeep
	}
	c, err := dial(ctx, url, protocols, mode)
	if err != nil {
		return nil, err
	}
	t.a.sock.Store(c)
	return frameConn{c}, nil
}
