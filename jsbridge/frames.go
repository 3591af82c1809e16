//go:build js && wasm

package jsbridge

import (
	"context"
	"encoding/binary"
	"errors"
	"math"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
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
// in relay.js's store (ModeParseHold), the payload's text stays in relay.js
// too, and the transcript's entry names it by its ref (Store.Commit); in
// Go's (ModeParseKeep) an acp.message comes with its payload's text, cut
// out of the message by relay.js (payloadText), which Go keeps without
// scanning: JSON.parse checked it. The engine delivers as always, and
// deliver hands relay.js back, per message, which of its objects to pass
// to onMessage. The payload is parsed exactly once, by JSON.parse, and
// never encoded again.
//
// A flushed batch is a sequence of records (jsbridge/boundary defines them).
// The ref of a parsed acp.message is relay.js's handle for the object it
// keeps; it travels with the frame to the engine (client.RefFrame) and back
// in the delivered client.Message (Message.Ref), and deliver hands it to
// relay.js, which passes that object to onMessage. The one frame read
// differently than Go's codec would is one whose seq is written as a number
// that is not an integer literal ("seq": 2.0): JSON.parse reads the number it
// is, Go's codec refuses it. A stream repeats its instance and session on
// every frame, so a RecACP field the same as the previous one is
// boundary.SameField.

// frameConn is the socket of an attachment made through the JavaScript
// API: a client.RefFrameReader, so the engine takes the frames relay.js
// parsed, with their refs, instead of parsing messages itself.
type frameConn struct{ *conn }

// errReadFrames: a frameConn's messages are records only ReadRefFrames reads.
var errReadFrames = errors.New("jsbridge: this socket is read with ReadRefFrames")

// Read implements client.Conn; the engine reads a RefFrameReader with
// ReadRefFrames only.
func (c frameConn) Read(context.Context) ([][]byte, error) { return nil, errReadFrames }

// ReadRefFrames implements client.RefFrameReader.
func (c frameConn) ReadRefFrames(ctx context.Context) ([]client.RefFrame, error) {
	batch, recs, err := c.next(ctx)
	if err != nil {
		return nil, err
	}
	return c.dec.decode(batch, recs), nil
}

// recDecoder turns records into frames. It keeps the previous RecACP's
// fields, which the next one may repeat by boundary.SameField.
type recDecoder struct {
	prev      [5]string // instance, session, id, re, trace
	prevValid bool      // the previous RecACP's frame passed Validate
}

// decode returns the frames of a batch of recs records (0: not known),
// each with its ref when relay.js keeps its parsed object. Nothing returned
// aliases batch. A message that is not a valid frame is left out, as the
// engine drops one that does not parse. Without a transcript (ModeParse) an
// acp.message's payload stays in relay.js: its frame has the ref and no
// Payload.
//
// The frames are allocated once, for the number of records relay.js counted
// (a frame is 120 bytes; a record of a stream's chunk without its payload
// is 37, so no estimate from the batch's length fits both kinds of batch):
// growing the slice as it filled was a tenth of relay.wasm's time per frame.
func (d *recDecoder) decode(batch []byte, recs int) []client.RefFrame {
	if recs <= 0 || recs > len(batch) { // no record is shorter than a byte
		recs = 1 + len(batch)/256
	}
	frames := make([]client.RefFrame, 0, recs)
	var kept []byte // the payloads of RecACPKeep, one after the other
	for len(batch) > 0 {
		kind := batch[0]
		batch = batch[1:]
		var ref float64
		if kind != boundary.RecText {
			if len(batch) < 8 {
				return frames
			}
			ref = math.Float64frombits(binary.LittleEndian.Uint64(batch))
			batch = batch[8:]
		}
		var f librelay.Frame
		var ok bool
		switch kind {
		case boundary.RecText, boundary.RecACPText:
			var msg []byte
			if msg, batch, ok = cut(batch); !ok {
				return frames
			}
			var err error
			if f, err = librelay.ParseFrame(msg); err != nil {
				continue
			}
		case boundary.RecACP, boundary.RecACPKeep:
			if f, batch, ok = d.envelope(batch); !ok {
				return frames
			}
			var payload []byte
			if kind == boundary.RecACPKeep {
				if payload, batch, ok = cut(batch); !ok {
					return frames
				}
			}
			if !d.prevValid {
				continue
			}
			if kind == boundary.RecACPKeep {
				if kept == nil {
					kept = make([]byte, 0, len(batch)+len(payload)) // every payload left fits
				}
				kept = append(kept, payload...)
				f.Payload = kept[len(kept)-len(payload) : len(kept) : len(kept)]
			}
		default:
			return frames // cannot happen: relay.js writes only the kinds above
		}
		rf := client.RefFrame{Frame: f}
		if kind != boundary.RecText && f.Type == librelay.TypeACPMessage {
			rf.Ref = uint64(ref)
		}
		frames = append(frames, rf)
	}
	return frames
}

// envelope reads a RecACP after its ref: the frame, with no payload yet.
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
		if n == boundary.SameField {
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
// JavaScript API: its sockets are frameConns.
type apiTransport struct {
	a    *attachment
	mode int // boundary.ModeParse, or with a transcript ModeParseHold or ModeParseKeep
}

// Dial implements client.Transport.
func (t apiTransport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	c, err := dial(ctx, url, protocols, t.mode, t.a.handle)
	if err != nil {
		return nil, err
	}
	return frameConn{c}, nil
}
