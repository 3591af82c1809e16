//go:build js

package client

import (
	"crypto/ed25519"
	"time"

	"github.com/hack-pad/safejs"

	"github.com/relaywasm/relaywasm/librelay"
)

// verifyWelcome is librelay.VerifyWelcome with the signature checked by
// the page's WebCrypto (Ed25519) first. relay.wasm's own check runs in code
// the engine has only just compiled: in Chromium it was 11–14 ms of a
// reload's time to live (make bench, marks around it), WebCrypto's well
// under one. librelay stays the one authority: whatever WebCrypto does not
// accept (a bad signature, a bad nonce or key, an engine without Ed25519
// in WebCrypto such as Safari before 17) is decided by VerifyWelcome, which
// returns its error, or nil. Both are Ed25519 (RFC 8032) verifiers: a
// signature made with the relay's key passes either, and neither passes
// one made without it.
func verifyWelcome(pub ed25519.PublicKey, nonce []byte, version int, instance string, sig []byte) error {
	if webCryptoVerifies(pub, nonce, version, instance, sig) {
		return nil
	}
	return librelay.VerifyWelcome(pub, nonce, version, instance, sig)
}

// webCryptoVerifies says whether crypto.subtle verifies sig over the
// welcome's signing input (librelay.SigningInput); false for every failure,
// including an engine that cannot.
func webCryptoVerifies(pub ed25519.PublicKey, nonce []byte, version int, instance string, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	input, err := librelay.SigningInput(nonce, version, instance)
	if err != nil {
		return false
	}
	subtle, err := safejs.Global().Get("crypto")
	if err == nil {
		subtle, err = subtle.Get("subtle")
	}
	if err != nil || subtle.IsUndefined() {
		return false // not a secure context
	}
	args, ok := jsBytes(pub, sig, input)
	if !ok {
		return false
	}
	usages, err := safejs.ValueOf([]any{"verify"})
	if err != nil {
		return false
	}
	key, ok := await(subtle.Call("importKey", "raw", args[0], "Ed25519", false, usages))
	if !ok {
		return false
	}
	valid, ok := await(subtle.Call("verify", "Ed25519", key, args[1], args[2]))
	if !ok {
		return false
	}
	b, err := valid.Bool()
	return err == nil && b
}

// jsBytes copies each of bs into a Uint8Array of its own.
func jsBytes(bs ...[]byte) ([]safejs.Value, bool) {
	u8, err := safejs.Global().Get("Uint8Array")
	if err != nil {
		return nil, false
	}
	out := make([]safejs.Value, len(bs))
	for i, b := range bs {
		if out[i], err = u8.New(len(b)); err != nil {
			return nil, false
		}
		if _, err = safejs.CopyBytesToJS(out[i], b); err != nil {
			return nil, false
		}
	}
	return out, true
}

// webCryptoWait bounds the wait for a WebCrypto Promise. They settle at
// once; the bound is there so that one that never settled would cost the
// handshake this long (then VerifyWelcome decides), not hang the runner.
const webCryptoWait = time.Second

// await waits for p (the result of a call that returns a Promise) to
// settle, and returns its value and whether it was fulfilled in time. It is
// called by the runner, never from a JavaScript callback, which the
// Promise's settling would need to return first.
func await(p safejs.Value, err error) (safejs.Value, bool) {
	if err != nil {
		return safejs.Undefined(), false
	}
	type outcome struct {
		v  safejs.Value
		ok bool
	}
	done := make(chan outcome, 1)
	// The two functions are released once the Promise settles, by
	// whichever it calls: released earlier (a wait given up on), a late
	// settling would call a released function, which panics.
	fns := make([]safejs.Func, 0, 2)
	release := func() {
		for _, f := range fns {
			f.Release()
		}
	}
	for _, ok := range []bool{true, false} {
		f, err := safejs.FuncOf(func(_ safejs.Value, args []safejs.Value) any {
			v := safejs.Undefined()
			if len(args) > 0 {
				v = args[0]
			}
			done <- outcome{v, ok}
			release()
			return nil
		})
		if err != nil {
			release()
			return safejs.Undefined(), false
		}
		fns = append(fns, f)
	}
	if _, err := p.Call("then", fns[0], fns[1]); err != nil {
		release()
		return safejs.Undefined(), false
	}
	t := time.NewTimer(webCryptoWait)
	defer t.Stop()
	select {
	case o := <-done:
		return o.v, o.ok
	case <-t.C:
		return safejs.Undefined(), false
	}
}
