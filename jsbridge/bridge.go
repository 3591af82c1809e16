//go:build js && wasm

// Package jsbridge is the Go half of relaywasm in the browser: a
// client.Transport on the page's own WebSocket, a client.Store adapter over
// relay.js's IndexedDB store, and the JavaScript API that relay.js exposes
// to applications.
//
// The JavaScript half lives in jsbridge/relayjs (relay.js and its modules).
// It owns the WebSocket event handlers, the IndexedDB store and a few
// helpers, and installs them as one object at a well-known global
// (boundary.BridgeGlobal) that this package looks up. Splitting the work
// this way keeps the page's hot path cheap: crossing from JavaScript into Go
// costs more than the work done per frame, so relay.js queues incoming
// messages and crosses once per event-loop turn with all of them in one
// byte buffer, into a Go callback registered once. It also keeps eval and
// new Function out of the module, which pages with a strict
// Content-Security-Policy require.
//
// Everything crosses the boundary through github.com/hack-pad/safejs
// (jsvalue.go), which turns what syscall/js would panic on into errors; the
// constants both sides share, and the boundary's version, are defined once
// in jsbridge/boundary, from which relay.js's boundary.js is generated.
package jsbridge

import (
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/hack-pad/safejs"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
)

// ErrNoBridge: relay.js was not loaded into the page, so there is nothing to
// open sockets with. loadRelay in relay.js loads it before the module starts.
var ErrNoBridge = errors.New("jsbridge: relay.js is not loaded (globalThis." + boundary.BridgeGlobal + " is missing)")

// ErrOtherBuild: the page's relay.js speaks another version of the boundary
// than this relay.wasm: they are from different builds. relay.js is told,
// and loadRelay rejects with wasm_load_failed.
var ErrOtherBuild = errors.New("jsbridge: relay.js and relay.wasm are from different builds (boundary version " + strconv.Itoa(boundary.Version) + " here)")

var (
	bridgeOnce sync.Once
	bridgeVal  Value
	bridgeErr  error
)

// theBridge returns relay.js's helper object, registering this process's
// callbacks with it on first use. The callbacks live as long as the process:
// they are the only way events reach Go, and creating them per socket or per
// request is what the design avoids.
func theBridge() (Value, error) {
	bridgeOnce.Do(initBridge)
	return bridgeVal, bridgeErr
}

// initBridge is not a closure inside theBridge so that theBridge stays small
// enough to inline everywhere without copying this body each time.
func initBridge() {
	b, err := global(boundary.BridgeGlobal)
	if err != nil || !isObject(b) {
		bridgeErr = ErrNoBridge
		return
	}
	version, _ := get(b, "version")
	if jsInt(version) != boundary.Version {
		_, _ = call(b, "refuse", boundary.Version) // a relay.js without refuse still sees the module exit
		bridgeErr = ErrOtherBuild
		return
	}
	if _, err := call(b, "init", funcOf(onFrames), funcOf(onSocket), funcOf(onDone)); err != nil {
		bridgeErr = err
		return
	}
	bridgeVal = b
}

// JavaScript reports asynchronous outcomes (the store's operations, settled
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
	kind  int // boundary.DoneOK or boundary.DoneFailed
	value Value
}

// maxPendingEvents is how many events one id can have outstanding (a
// store's fallback id hears of the fall back once).
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
func onDone(args []Value) any {
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

// Bytes cross the boundary through two buffers of relay.js (crossing.js),
// each one Value Go keeps rather than a new one (with its finalizer) per call:
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
	in   Value

	outMu  sync.Mutex
	out    Value
	outLen int
}

// readIn copies n bytes of the in buffer to the end of dst. fresh is the
// buffer when relay.js passed a new one, or null.
func readIn(dst []byte, n int, fresh Value) ([]byte, error) {
	crossing.inMu.Lock()
	defer crossing.inMu.Unlock()
	if isObject(fresh) {
		crossing.in = fresh
	}
	old := len(dst)
	dst = slices.Grow(dst, n)[:old+n]
	if _, err := safejs.CopyBytesToGo(dst[old:], crossing.in); err != nil {
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
func withOut(b []byte, method string, args ...any) (Value, error) {
	bridge, err := theBridge()
	if err != nil {
		return safejs.Undefined(), err
	}
	crossing.outMu.Lock()
	defer crossing.outMu.Unlock()
	// The first buffer (even for an empty b: a commit with no entries can
	// be the first to cross), a bigger one when b does not fit, a small one
	// again when a burst left a big one and b is small.
	if !isObject(crossing.out) || crossing.outLen < len(b) || crossing.outLen > bigOut && len(b) <= smallOut {
		arr, err := call(bridge, "outBuffer", len(b))
		if err != nil {
			return safejs.Undefined(), err
		}
		n, _ := arr.Length()
		crossing.out, crossing.outLen = arr, n
	}
	if len(b) > 0 { // most commits have no entries: no copy to make
		if _, err := safejs.CopyBytesToJS(crossing.out, b); err != nil {
			return safejs.Undefined(), err
		}
	}
	return call(bridge, method, args...)
}
