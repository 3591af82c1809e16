//go:build !js

package client

import "github.com/relaywasm/relaywasm/librelay"

// newNonce is librelay.NewNonce (crypto/rand); the browser build draws the
// same bytes from the page (nonce_js.go).
func newNonce() ([]byte, error) { return librelay.NewNonce() }
