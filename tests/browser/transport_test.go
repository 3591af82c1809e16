//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// These tests drive jsbridge.Transport by hand against the dev relay, below
// the engine, to pin what the engine relies on: the relay's close code and
// reason arrive as a *client.CloseError, and every frame the relay sent before
// closing is read before the close is.

// dialRelay opens a socket to the dev relay's browser leg with token.
func dialRelay(t *testing.T, ctx context.Context, token string) client.Conn {
	t.Helper()
	c, err := jsbridge.Transport{}.Dial(ctx, env(t, "RELAY_ATTACH_URL"),
		[]string{relayleg.Subprotocol, relayleg.BearerSubprotocol(token)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(1000, "") })
	return c
}

// hello sends the client's relay.hello for instance.
func hello(t *testing.T, ctx context.Context, c client.Conn, instance string) {
	t.Helper()
	nonce, err := librelay.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := librelay.Hello{ProtocolVersion: librelay.ProtocolVersion, Instance: instance, Agent: "browser-test", Nonce: nonce}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	send(t, ctx, c, &librelay.Frame{Type: librelay.TypeHello, ID: "h1", Instance: instance, Payload: payload})
}

func send(t *testing.T, ctx context.Context, c client.Conn, f *librelay.Frame) {
	t.Helper()
	msg, err := librelay.AppendFrame(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

// readUntilClose reads every frame up to the close and returns them with the
// error that ended the socket.
func readUntilClose(t *testing.T, ctx context.Context, c client.Conn) (frames []librelay.Frame, batches int, err error) {
	t.Helper()
	for {
		batch, err := c.Read(ctx)
		if err != nil {
			return frames, batches, err
		}
		batches++
		for _, m := range batch {
			f, err := librelay.ParseFrame(m)
			if err != nil {
				t.Fatalf("frame %d: %v: %q", len(frames), err, m)
			}
			frames = append(frames, f)
		}
	}
}

func wantClose(t *testing.T, err error, code relayleg.CloseCode, reason string) {
	t.Helper()
	var ce *client.CloseError
	if !errors.As(err, &ce) || ce.Code != int(code) || ce.Reason != reason {
		t.Fatalf("socket ended with %v, want a CloseError %d %q", err, code, reason)
	}
}

func errorCode(t *testing.T, f librelay.Frame) string {
	t.Helper()
	if f.Type != librelay.TypeError {
		t.Fatalf("got a %s frame, want %s", f.Type, librelay.TypeError)
	}
	var e librelay.Error
	if err := e.UnmarshalJSON(f.Payload); err != nil {
		t.Fatal(err)
	}
	return e.Code
}

// A refused hello is a relay.error followed at once by the close: the error
// frame must not be lost, and the close code and reason must reach Go.
func TestTransportRefusalsKeepTheirFrameAndCode(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		first       func(context.Context, *testing.T, client.Conn)
		code        string
		close       relayleg.CloseCode
	}{
		{"bad credential", "not-the-token", func(ctx context.Context, t *testing.T, c client.Conn) {
			hello(t, ctx, c, env(t, "RELAY_INSTANCE"))
		}, relayleg.CodeUnauthorized, relayleg.CloseUnauthorized},
		{"no hello first", env(t, "RELAY_TOKEN"), func(ctx context.Context, t *testing.T, c client.Conn) {
			send(t, ctx, c, &librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb"})
		}, librelay.CodeMalformedFrame, relayleg.CloseBadHello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			c := dialRelay(t, ctx, tc.token)
			tc.first(ctx, t, c)
			frames, _, err := readUntilClose(t, ctx, c)
			if len(frames) != 1 {
				t.Fatalf("got %d frames before the close, want the relay.error", len(frames))
			}
			if got := errorCode(t, frames[0]); got != tc.code {
				t.Fatalf("relay.error %q, want %q", got, tc.code)
			}
			wantClose(t, err, tc.close, tc.code)
		})
	}
}

// A burst of frames right before the close all arrive, in order, batched.
func TestTransportBurstBeforeCloseIsNotLost(t *testing.T) {
	ctx := testContext(t)
	c := dialRelay(t, ctx, env(t, "RELAY_TOKEN"))
	hello(t, ctx, c, env(t, "RELAY_INSTANCE"))
	batch, err := c.Read(ctx)
	if err != nil || len(batch) != 1 {
		t.Fatalf("waiting for the welcome: %d frames, %v", len(batch), err)
	}
	welcome, err := librelay.ParseFrame(batch[0])
	if err != nil || welcome.Type != librelay.TypeWelcome {
		t.Fatalf("first frame %q (%v), want a welcome", batch[0], err)
	}

	// Heartbeats the relay answers one by one, then acp.detach, which it
	// answers by closing with 1000: the acks are queued right before the close.
	const n = 2000
	for i := range n {
		send(t, ctx, c, &librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb" + strconv.Itoa(i)})
	}
	send(t, ctx, c, &librelay.Frame{Type: librelay.TypeACPDetach, Instance: welcome.Instance, Session: welcome.Session})

	frames, batches, err := readUntilClose(t, ctx, c)
	if len(frames) != n {
		t.Fatalf("got %d frames before the close (%v), want %d acks", len(frames), err, n)
	}
	for i, f := range frames {
		if f.Type != librelay.TypeAck || f.ReplyTo != "hb"+strconv.Itoa(i) {
			t.Fatalf("frame %d is %s re %q, want the ack of hb%d", i, f.Type, f.ReplyTo, i)
		}
	}
	wantClose(t, err, relayleg.CloseNormal, "detached")
	if batches >= n/2 {
		t.Fatalf("%d frames came in %d reads: the transport does not batch", n, batches)
	}
	t.Logf("%d frames in %d reads", len(frames), batches)
}

// During a flood relay.js spaces its flushes (sockets.js): after a batch of
// boundary.FloodBatch frames or more, the next comes no sooner than
// boundary.FloodMs after it, however fast the frames arrive, and every frame
// still arrives, once, in order. A batch is read here before the flush that
// carried it ends, and the wait counts from that end, so only a lower bound
// on the time between reads is checked, less a margin for the clock's
// resolution (a millisecond in some engines): a busy machine makes batches
// later, never sooner. In a hidden page nothing is spaced, so there the
// test has nothing to check.
func TestTransportSpacesAFloodsFlushes(t *testing.T) {
	if js.Global().Get("document").Get("hidden").Bool() {
		t.Skip("the page is hidden: relay.js spaces no flush there")
	}
	ctx := testContext(t)
	c := dialRelay(t, ctx, env(t, "RELAY_TOKEN"))
	hello(t, ctx, c, env(t, "RELAY_INSTANCE"))
	if batch, err := c.Read(ctx); err != nil || len(batch) != 1 {
		t.Fatalf("waiting for the welcome: %d frames, %v", len(batch), err)
	}
	// Heartbeats the relay answers one by one, 20 at a time with the page's
	// event loop let run in between: the acks come as a flood that lasts
	// longer than a few FloodMs, in many short turns of the page.
	const n, per = 3000, 20
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			msg, err := librelay.AppendFrame(nil, &librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb" + strconv.Itoa(i)})
			if err == nil {
				err = c.Write(ctx, msg)
			}
			if err != nil {
				sent <- err
				return
			}
			if i%per == per-1 {
				time.Sleep(time.Microsecond) // a timer: JavaScript runs meanwhile
			}
		}
		sent <- nil
	}()
	const margin = 4 * time.Millisecond
	floor := time.Duration(boundary.FloodMs)*time.Millisecond - margin
	var prev time.Time
	prevN, got, spaced, batches := 0, 0, 0, 0
	least := time.Duration(1<<63 - 1) // the shortest gap after a flood's batch
	for got < n {
		batch, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d acks: %v", got, n, err)
		}
		now := time.Now()
		if gap := now.Sub(prev); prevN >= boundary.FloodBatch {
			if gap < floor {
				t.Fatalf("a batch of %d frames came %v after one of %d: want at least %v (FloodMs %d, less %v for the clock)",
					len(batch), gap, prevN, floor, boundary.FloodMs, margin)
			}
			spaced++
			least = min(least, gap)
		}
		for _, m := range batch {
			f, err := librelay.ParseFrame(m)
			if err != nil || f.Type != librelay.TypeAck || f.ReplyTo != "hb"+strconv.Itoa(got) {
				t.Fatalf("frame %d is %q (%v), want the ack of hb%d", got, m, err, got)
			}
			got++
		}
		prev, prevN = now, len(batch)
		batches++
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if spaced == 0 {
		t.Fatalf("%d acks in %d batches, none of %d or more: no flood to space", n, batches, boundary.FloodBatch)
	}
	t.Logf("%d acks in %d batches, %d of them spaced, the soonest %v after the one before", n, batches, spaced, least)
}

func TestTransportLocalClose(t *testing.T) {
	ctx := testContext(t)
	c := dialRelay(t, ctx, env(t, "RELAY_TOKEN"))
	if err := c.Close(1001, ""); err == nil {
		t.Fatal("closing with 1001 succeeded; browsers let script send only 1000 and 3000-4999")
	}
	if err := c.Close(1000, "bye"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(ctx); !errors.Is(err, jsbridge.ErrClosedLocally) {
		t.Fatalf("Read after Close: %v, want ErrClosedLocally", err)
	}
	if err := c.Write(ctx, []byte(`{}`)); !errors.Is(err, client.ErrNotSent) {
		t.Fatalf("Write after Close: %v, want ErrNotSent", err)
	}
}

// Port 1 is on Fetch's bad-ports list: Chromium and Firefox fire error and
// close at once, WebKit only error (see TestEngineWebKitErrorWithoutClose).
func TestTransportDialRefused(t *testing.T) {
	ctx := testContext(t)
	_, err := jsbridge.Transport{}.Dial(ctx, "ws://127.0.0.1:1/v1/attach", nil)
	var ce *client.CloseError
	if !errors.Is(err, jsbridge.ErrDialFailed) || errors.As(err, &ce) {
		t.Fatalf("dialing a closed port: %v, want ErrDialFailed", err)
	}
	if _, err := (jsbridge.Transport{}).Dial(ctx, "not a url", nil); err == nil {
		t.Fatal("dialing a bad URL succeeded")
	}
}

// A URL the browser's WebSocket will not take (its constructor throws: a
// port out of range here; a secure page's ws:// is another) ends the
// attach with ErrBadOptions at once, saying why: no redial would be let
// through. Before, the engine redialled it with backoff for as long as the
// attach's context allowed.
func TestAttachToAURLTheBrowserRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(testContext(t), 20*time.Second)
	defer cancel()
	const url = "ws://127.0.0.1:99999/v1/attach"
	_, err := client.Attach(ctx, client.Options{
		URL: url, Instance: env(t, "RELAY_INSTANCE"),
		Credential: func(context.Context) (string, error) { return env(t, "RELAY_TOKEN"), nil },
		Store:      client.NewMemoryStore(), Transport: jsbridge.Transport{},
		OnMessage: func(client.Message) error { return nil },
	})
	if !errors.Is(err, client.ErrBadOptions) || client.Code(err) != "bad_options" || !strings.Contains(err.Error(), url) {
		t.Fatalf("attaching to %s: %v (code %s), want bad_options naming the URL", url, err, client.Code(err))
	}
}

// JavaScript can throw any value; relay.js makes it an Error before Go sees
// it (safejs, through which jsbridge calls JavaScript, reads an exception's
// message and cannot describe a string or a BigInt). A dial whose WebSocket
// constructor throws one fails with what was thrown, and the module goes on.
func TestThrownValuesThatAreNotErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		bigint     bool
	}{{"a string", "thrown text", false}, {"a BigInt", "4242", true}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testContext(t)
			undo := faults(t).Call("throwOnWebSocket", c.text, c.bigint)
			_, err := jsbridge.Transport{}.Dial(ctx, env(t, "RELAY_ATTACH_URL"), nil)
			undo.Invoke()
			if err == nil || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("Dial = %v, want an error saying %q", err, c.text)
			}
			dialRelay(t, ctx, env(t, "RELAY_TOKEN")) // the module still works
		})
	}
}
