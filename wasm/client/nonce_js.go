//go:build js

package client

import (
	"github.com/hack-pad/safejs"

	"github.com/relaywasm/relaywasm/librelay"
)

// newNonce is librelay.NewNonce's bytes drawn from the page's
// crypto.getRandomValues, where crypto/rand's come from on js/wasm too.
// Going there directly keeps crypto/rand's FIPS generator (its AES and
// DRBG, about 6 KB of relay.wasm gzipped) out of the module.
func newNonce() ([]byte, error) {
	crypto, err := safejs.Global().Get("crypto")
	if err != nil {
		return nil, err
	}
	bytes, err := safejs.Global().Get("Uint8Array")
	if err != nil {
		return nil, err
	}
	arr, err := bytes.New(librelay.NonceSize)
	if err != nil {
		return nil, err
	}
	if _, err := crypto.Call("getRandomValues", arr); err != nil {
		return nil, err
	}
	n := make([]byte, librelay.NonceSize)
	if _, err := safejs.CopyBytesToGo(n, arr); err != nil {
		return nil, err
	}
	return n, nil
}
