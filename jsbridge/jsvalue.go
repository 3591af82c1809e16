//go:build js && wasm

package jsbridge

import (
	"errors"
	"syscall/js"
)

// This file is the package's only way across the boundary. syscall/js
// panics when JavaScript throws, and when a value is not of the type asked
// for; a panic in a goroutine of this module ends the module, and one in a
// callback ends it in the middle of the page's event. So every operation
// that can throw goes through a helper here that recovers the panic into an
// error, and every read of a value the page handed over checks the type
// first instead of trusting it. See the package doc for why this is ours and
// not a library.

// get reads v[p]. It fails when v is not an object or a getter throws.
func get(v js.Value, p string) (res js.Value, err error) {
	defer catch(&err)
	return v.Get(p), nil
}

// index reads v[i]. It fails when v is not an object or a getter throws.
func index(v js.Value, i int) (res js.Value, err error) {
	defer catch(&err)
	return v.Index(i), nil
}

// length reads v.length as an int, 0 when v has none.
func length(v js.Value) int {
	n, _ := get(v, "length")
	return jsInt(n)
}

// call calls v's method m. Arguments are converted by js.ValueOf (a js.Func,
// js.Value, string, number, bool, nil, []any or map[string]any); anything
// else fails instead of panicking.
func call(v js.Value, m string, args ...any) (res js.Value, err error) {
	defer catch(&err)
	return v.Call(m, args...), nil
}

// newObject calls the constructor ctor with new.
func newObject(ctor js.Value, args ...any) (res js.Value, err error) {
	defer catch(&err)
	return ctor.New(args...), nil
}

// global reads globalThis[p].
func global(p string) (js.Value, error) { return get(js.Global(), p) }

// copyBytesToGo copies from the Uint8Array src into dst.
func copyBytesToGo(dst []byte, src js.Value) (n int, err error) {
	defer catch(&err)
	return js.CopyBytesToGo(dst, src), nil
}

// copyBytesToJS copies src into the Uint8Array dst.
func copyBytesToJS(dst js.Value, src []byte) (n int, err error) {
	defer catch(&err)
	return js.CopyBytesToJS(dst, src), nil
}

// funcOf wraps fn for JavaScript. fn must not block (see the package doc).
// A panic in fn does not reach JavaScript: it is recovered, reported on the
// console, and the call returns undefined. The callbacks are written not to
// panic; this keeps a mistake in one from ending the whole module.
func funcOf(fn func(this js.Value, args []js.Value) any) js.Func {
	return js.FuncOf(func(this js.Value, args []js.Value) (res any) {
		defer func() {
			if r := recover(); r != nil {
				res = nil
				console, _ := global("console")
				_, _ = call(console, "error", "relay.wasm: a callback failed: "+panicError(r).Error())
			}
		}()
		return fn(this, args)
	})
}

// catch is deferred by the helpers above: it turns a panic into *err.
func catch(err *error) {
	if r := recover(); r != nil {
		*err = panicError(r)
	}
}

// errPanic stands for a panic value that says nothing printable.
var errPanic = errors.New("jsbridge: a JavaScript operation failed")

// panicError turns a recovered panic value into an error, without fmt
// (which would cost the module about 99 KB gzip). A JavaScript exception
// stays a js.Error, so its name and message can be read; a thrown value that
// is not an object (throw "text") becomes a plain error with JavaScript's
// String() of it instead, because js.Error's Error method reads .message and
// would itself panic on it. syscall/js's type errors are *js.ValueError or
// strings. The stack is left out: nothing here prints one.
func panicError(r any) error {
	switch r := r.(type) {
	case js.Error:
		if isObject(r.Value) {
			return r
		}
		s, _ := call(js.Global(), "String", r.Value)
		return errors.New("JavaScript error: " + jsString(s))
	case error:
		return r
	case string:
		return errors.New(r)
	}
	return errPanic
}

// isObject says whether v is an object or a function.
func isObject(v js.Value) bool {
	t := typeOf(v)
	return t == js.TypeObject || t == js.TypeFunction
}

// typeOf is v.Type(), except that a BigInt, on which js.Value.Type panics,
// reads as undefined: none of the readers below accepts one, and a page can
// throw or pass one like any other value.
func typeOf(v js.Value) (t js.Type) {
	defer func() {
		if recover() != nil {
			t = js.TypeUndefined
		}
	}()
	return v.Type()
}

// jsInt reads a JavaScript number as an int, 0 when it is not one.
func jsInt(v js.Value) int {
	if typeOf(v) != js.TypeNumber {
		return 0
	}
	return v.Int()
}

// jsFloat reads a JavaScript number, 0 when it is not one.
func jsFloat(v js.Value) float64 {
	if typeOf(v) != js.TypeNumber {
		return 0
	}
	return v.Float()
}

// jsBool reads a JavaScript boolean, false when it is not one.
func jsBool(v js.Value) bool {
	return typeOf(v) == js.TypeBoolean && v.Bool()
}

// jsString reads a JavaScript string, "" when it is not one.
func jsString(v js.Value) string {
	if typeOf(v) != js.TypeString {
		return ""
	}
	return v.String()
}
