//go:build js && wasm

package jsbridge

import (
	"github.com/hack-pad/safejs"
)

// This file is the package's only way across the boundary, and it goes
// through github.com/hack-pad/safejs: every call, read and copy returns an
// error where syscall/js would panic (JavaScript threw, or a value has the
// wrong type), so a failure in the page never ends the module. relay.js
// throws nothing but Errors into Go (errors.js guarded, asError), because
// safejs reads an exception's message and cannot describe a thrown string
// or BigInt. Reads of values the page handed over check the type first
// instead of trusting it.

// A Value is a JavaScript value, read and called only through safejs.
type Value = safejs.Value

// get reads v[p].
func get(v Value, p string) (Value, error) { return v.Get(p) }

// call calls v's method m. Arguments are converted as js.ValueOf does (a
// Value, string, number, bool, nil, []any or map[string]any).
func call(v Value, m string, args ...any) (Value, error) { return v.Call(m, args...) }

// global reads globalThis[p].
func global(p string) (Value, error) { return safejs.Global().Get(p) }

// funcOf wraps fn for JavaScript. fn must not block (see the package doc).
// A panic in fn does not reach JavaScript: it is recovered, reported on the
// console, and the call returns undefined. The callbacks are written not to
// panic; this keeps a mistake in one from ending the whole module.
func funcOf(fn func(args []Value) any) safejs.Func {
	f, err := safejs.FuncOf(func(_ Value, args []Value) (res any) {
		defer func() {
			if r := recover(); r != nil {
				res = nil
				console, _ := global("console")
				_, _ = call(console, "error", "relay.wasm: a callback failed")
			}
		}()
		return fn(args)
	})
	if err != nil {
		panic("jsbridge: cannot make a callback: " + err.Error()) // syscall/js never fails here
	}
	return f
}

// arg is argument i as relay.js passed it, undefined when it passed fewer:
// the readers below then give their zero value, never a panic.
func arg(args []Value, i int) Value {
	if i >= len(args) {
		return safejs.Undefined()
	}
	return args[i]
}

// isObject says whether v is an object or a function.
func isObject(v Value) bool {
	t := typeOf(v)
	return t == safejs.TypeObject || t == safejs.TypeFunction
}

// typeOf is v.Type(), except that a BigInt, on which syscall/js panics,
// reads as undefined: none of the readers below accepts one.
func typeOf(v Value) (t safejs.Type) {
	defer func() {
		if recover() != nil {
			t = safejs.TypeUndefined
		}
	}()
	return v.Type()
}

// jsInt reads a JavaScript number as an int, 0 when it is not one.
func jsInt(v Value) int {
	if typeOf(v) != safejs.TypeNumber {
		return 0
	}
	n, _ := v.Int()
	return n
}

// jsFloat reads a JavaScript number, 0 when it is not one.
func jsFloat(v Value) float64 {
	if typeOf(v) != safejs.TypeNumber {
		return 0
	}
	f, _ := v.Float()
	return f
}

// jsBool reads a JavaScript boolean, false when it is not one.
func jsBool(v Value) bool {
	if typeOf(v) != safejs.TypeBoolean {
		return false
	}
	b, _ := v.Bool()
	return b
}

// emptyString is JavaScript's "", held for the life of the module.
// wasm_exec.js hands Go one reference per distinct value while Go holds it,
// so a "" from JavaScript (the trace of every untraced sendACP) is known by
// comparing references, in Go, instead of by two calls across to read it.
var emptyString, _ = safejs.ValueOf("")

// jsString reads a JavaScript string, "" when it is not one.
func jsString(v Value) string {
	if v.Equal(emptyString) || typeOf(v) != safejs.TypeString {
		return ""
	}
	s, _ := v.String()
	return s
}

// jsField reads the string v[p], "" when there is none.
func jsField(v Value, p string) string {
	f, _ := get(v, p)
	return jsString(f)
}

// jsError is the Error relay.js reports a failure with (its name and
// message), as a Go error.
func jsError(v Value, what string) error {
	return &JSError{What: what, Name: jsField(v, "name"), Message: jsField(v, "message")}
}

// JSError is a failure relay.js reported: what failed, and the JavaScript
// Error's name and message.
type JSError struct {
	What, Name, Message string
}

func (e *JSError) Error() string { return "jsbridge: " + e.What + ": " + e.Name + ": " + e.Message }
