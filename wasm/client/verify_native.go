//go:build !js

package client

import "github.com/relaywasm/relaywasm/librelay"

// verifyWelcome is librelay.VerifyWelcome; the browser build asks the
// page's WebCrypto first (verify_js.go).
var verifyWelcome = librelay.VerifyWelcome
