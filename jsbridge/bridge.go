//go:build js && wasm

// Package jsbridge is the Go half of relaywasm in the browser: a
// client.Transport on the page's own WebSocket, a client.Store in IndexedDB,
// and the JavaScript API that relay.js exposes to applications.
//
// The JavaScript half lives in jsbridge/relayjs (relay.js). It owns the WebSocket
// event handlers and a few helpers, and installs them at a well-known global
// (bridgeGlobal) that this package looks up. Splitting the work this way keeps
// the page's hot path cheap: crossing from JavaScript into Go costs more than
// the work done per frame, so relay.js queues incoming messages and crosses
// once per event-loop turn with all of them in one byte buffer, into a Go
// callback registered once. It also keeps eval and new Function out of the
// module, which pages with a strict Content-Security-Policy require.
//
// Everything crosses the boundary through a few helpers of this package over
// syscall/js (jsvalue.go). syscall/js panics when JavaScript throws or a value
// has the wrong type; the helpers turn that into a Go error, so a failure in
// the page never ends the module and a callback never panics into JavaScript.
// The layer is ours, not a library such as github.com/hack-pad/safejs, for
// size: safejs formats panic values with fmt, which linked fmt and what it
// drags in (reflection-based printing, internal/fmtsort, more of time) into
// relay.wasm. Replacing it took the module from 1,047,835 to 948,881 bytes
// gzip -9 (3,769,740 to 3,404,524 raw), under its 1.0 MB gzip budget. Keep
// fmt out of what relay.wasm links (make size lists its packages).
package jsbridge

import (
	"errors"
	"slices"
	"sync"
	"syscall/js"

	"github.com/relaywasm/relaywasm/librelay"
)

// bridgeGlobal names the object relay.js installs on globalThis. Its version
// changes with the contract between relay.js and relay.wasm.
const bridgeGlobal = "__relaywasm_bridge_v1"

// ErrNoBridge: relay.js was not loaded into the page, so there is nothing to
// open sockets with. loadRelay in relay.js loads it before the module starts.
var ErrNoBridge = errors.New("jsbridge: relay.js is not loaded (globalThis." + bridgeGlobal + " is missing)")

var (
	bridgeOnce sync.Once
	bridgeVal  js.Value
	bridgeErr  error
)

// theBridge returns relay.js's helper object, registering this process's
// callbacks with it on first use. The callbacks live as long as the process:
// they are the only way events reach Go, and creating them per socket or per
// request is what the design avoids.
func theBridge() (js.Value, error) {
	bridgeOnce.Do(initBridge)
	return bridgeVal, bridgeErr
}

// initBridge is not a closure inside theBridge so that theBridge stays small
// enough to inline everywhere without copying this body each time.
func initBridge() {
	b, err := global(bridgeGlobal)
	if err != nil || b.IsUndefined() || b.IsNull() {
		bridgeErr = ErrNoBridge
		return
	}
	args := make([]any, 0, 6)
	for _, fn := range []func(js.Value, []js.Value) any{onFrames, onSocket, onDone, onTurn} {
		args = append(args, funcOf(fn))
	}
	// What relay.js must know to hand frames over as Go would read them.
	args = append(args, librelay.TypeACPMessage, librelay.MaxFrameBytes)
	if _, err := call(b, "init", args...); err != nil {
		bridgeErr = err
		return
	}
	bridgeVal = b
}

// JavaScript reports asynchronous outcomes (IndexedDB events, settled
// Promises) to one Go callback, onDone, as (id, kind, value). newWait hands
// out the id and a buffered channel the callback sends on without blocking,
// so the callback stays non-blocking however slow the waiting goroutine is.
var waits = struct {
	mu   sync.Mutex
	next int
	m    map[int]chan jsEvent
}{m: make(map[int]chan jsEvent)}

// A jsEvent is one outcome reported to onDone.
type jsEvent struct {
	kind  int
	value js.Value
}

// Kinds every reporter uses; IndexedDB's open adds its own.
const (
	doneOK     = 0 // success, complete, fulfilled (value: the result)
	doneFailed = 1 // error, abort, rejected (value: the error)
)

// maxPendingEvents is how many events one id can have outstanding (an
// IndexedDB open: upgradeneeded, blocked, then success).
const maxPendingEvents = 4

// newWait registers a waiter. stop must be called once the caller no longer
// waits, so late events are dropped instead of kept.
func newWait() (id int, events <-chan jsEvent, stop func()) {
	ch := make(chan jsEvent, maxPendingEvents)
	waits.mu.Lock()
	waits.next++
	id = waits.next
	waits.m[id] = ch
	waits.mu.Unlock()
	return id, ch, func() {
		waits.mu.Lock()
		delete(waits.m, id)
		waits.mu.Unlock()
	}
}

// onDone receives (id, kind, value) from relay.js.
func onDone(_ js.Value, args []js.Value) any {
	if len(args) < 3 {
		return nil
	}
	waits.mu.Lock()
	ch := waits.m[jsInt(args[0])]
	waits.mu.Unlock()
	if ch != nil {
		select {
		case ch <- jsEvent{kind: jsInt(args[1]), value: args[2]}:
		default:
		}
	}
	return nil
}

// onTurn is relay.js telling Go that the event-loop turn in which later() was
// called has ended. The Store batches its writes on it.
func onTurn(js.Value, []js.Value) any {
	turnWaiters.mu.Lock()
	ws := turnWaiters.list
	turnWaiters.list = nil
	turnWaiters.mu.Unlock()
	for _, w := range ws {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	return nil
}

var turnWaiters struct {
	mu   sync.Mutex
	list []chan struct{}
}

// nextTurn arranges for ch to receive (without blocking the sender) once the
// current event-loop turn has ended.
func nextTurn(ch chan struct{}) error {
	b, err := theBridge()
	if err != nil {
		return err
	}
	turnWaiters.mu.Lock()
	turnWaiters.list = append(turnWaiters.list, ch)
	turnWaiters.mu.Unlock()
	_, err = call(b, "later")
	return err
}

// Bytes cross the boundary through two buffers of relay.js, each one
// js.Value Go keeps rather than a new one (with its finalizer) per call:
//
//   - in, which JavaScript fills (a flushed batch of messages, a message to
//     send) and Go copies out of during the call that says so. relay.js
//     passes it along with a call only when it is new.
//   - out, which Go fills (a delivery's entries, a frame to send) just
//     before the call that reads it; relay.js makes a bigger one when Go
//     asks (outBuffer).
//
// Each has its own lock. out's is held during the call that reads it,
// which may run application handlers that call back into Go (sendACP from
// onMessage): those take in's, never out's.
var crossing struct {
	inMu sync.Mutex
	in   js.Value

	outMu  sync.Mutex
	out    js.Value
	outLen int
}

// readIn copies n bytes of the in buffer to the end of dst. fresh is the
// buffer when relay.js passed a new one, or null.
func readIn(dst []byte, n int, fresh js.Value) ([]byte, error) {
	crossing.inMu.Lock()
	defer crossing.inMu.Unlock()
	if isObject(fresh) {
		crossing.in = fresh
	}
	old := len(dst)
	dst = slices.Grow(dst, n)[:old+n]
	if _, err := copyBytesToGo(dst[old:], crossing.in); err != nil {
		return dst[:old], err
	}
	return dst, nil
}

// Sizes of the out buffer: relay.js's is at least smallOut, and one above
// bigOut is replaced by a small one once no more is needed.
const (
	smallOut = 64 << 10
	bigOut   = 8 << 20
)

// withOut copies b into the out buffer and makes the call that reads it,
// call(bridge, method, args…), while no other can fill the buffer.
func withOut(b []byte, method string, args ...any) (js.Value, error) {
	bridge, err := theBridge()
	if err != nil {
		return js.Undefined(), err
	}
	crossing.outMu.Lock()
	defer crossing.outMu.Unlock()
	// A bigger buffer when b does not fit; a small one again when a burst
	// left a big one and b is small.
	if crossing.outLen < len(b) || crossing.outLen > bigOut && len(b) <= smallOut {
		arr, err := call(bridge, "outBuffer", len(b))
		if err != nil {
			return js.Undefined(), err
		}
		crossing.out, crossing.outLen = arr, length(arr)
	}
	if _, err := copyBytesToJS(crossing.out, b); err != nil {
		return js.Undefined(), err
	}
	return call(bridge, method, args...)
}
