//go:build js && wasm

package jsbridge

import (
	"context"
	"errors"
	"syscall/js"
)

// IndexedDB is asynchronous: every request answers with an event. relay.js's
// watch(target, id) forwards those events to onDone (see newWait). The
// waiting goroutine runs before control returns to JavaScript, so it can
// issue the next request of a transaction while the transaction is still
// active.

// Kinds of event watch reports, beside doneOK and doneFailed.
const (
	idbBlocked = 2 // an open waits for other connections to close
	idbUpgrade = 3 // an open must create the schema
)

// watch subscribes to target's events. stop must be called once the caller
// no longer waits, so late events are dropped instead of kept.
func watch(target js.Value) (events <-chan jsEvent, stop func(), err error) {
	b, err := theBridge()
	if err != nil {
		return nil, nil, err
	}
	id, events, stop := newWait()
	if _, err := call(b, "watch", target, id); err != nil {
		stop()
		return nil, nil, err
	}
	return events, stop, nil
}

// await waits for a request's result or a transaction's completion.
func await(ctx context.Context, target js.Value) (js.Value, error) {
	events, stop, err := watch(target)
	if err != nil {
		return js.Undefined(), err
	}
	defer stop()
	select {
	case ev := <-events:
		if ev.kind != doneOK {
			return js.Undefined(), domError(ev.value)
		}
		return ev.value, nil
	case <-ctx.Done():
		return js.Undefined(), ctx.Err()
	}
}

// DOMError is an IndexedDB failure as the browser reported it.
type DOMError struct {
	Name    string // e.g. "QuotaExceededError", "AbortError"
	Message string
}

func (e *DOMError) Error() string { return "jsbridge: IndexedDB: " + e.Name + ": " + e.Message }

// domError turns a DOMException (or null, for an abort without one) into an error.
func domError(v js.Value) error {
	if v.IsNull() || v.IsUndefined() {
		return &DOMError{Name: "AbortError", Message: "the transaction was aborted"}
	}
	name, _ := get(v, "name")
	msg, _ := get(v, "message")
	return &DOMError{Name: jsString(name), Message: jsString(msg)}
}

// errName is the name of the DOMException behind err (reported by an event,
// or thrown by a call), or "".
func errName(err error) string {
	// errors.AsType rather than errors.As, which would link reflection.
	if de, ok := errors.AsType[*DOMError](err); ok {
		return de.Name
	}
	if je, ok := errors.AsType[js.Error](err); ok {
		n, _ := get(je.Value, "name")
		return jsString(n)
	}
	return ""
}
