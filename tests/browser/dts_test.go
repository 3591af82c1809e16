//go:build js && wasm

package browser

import (
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/jsbridge"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// relay.d.ts promises that every error code the page can see is listed
// there. The codes come from Go: the engine's errors, the reasons the
// relay's close codes stand for, and the store's fallback reasons.
func TestDeclarationsListEveryCode(t *testing.T) {
	codes := []string{"canceled", "timeout", "error", "closed_by_relay", "wasm_load_failed", "wasm_exited"}
	for _, e := range []*client.Error{
		client.ErrUnauthorized, client.ErrBadRelaySignature, client.ErrUnsupportedVersion, client.ErrSuperseded,
		client.ErrDetached, client.ErrClosed, client.ErrBadOptions, client.ErrBadPayload, client.ErrBadCursor,
		client.ErrSendQueueFull, client.ErrSendFailed, client.ErrUnknownInstance, client.ErrRuntimeGone,
		client.ErrHeartbeatTimeout, client.ErrProtocol, client.ErrUnreachable, client.ErrOffline,
	} {
		codes = append(codes, e.Code())
	}
	for code := 1000; code < 5000; code++ {
		if r := relayleg.CloseCode(code).Reason(); r != "" {
			codes = append(codes, r)
		}
	}
	codes = append(codes, jsbridge.FallbackUnavailable, jsbridge.FallbackBlocked, jsbridge.FallbackFailed, jsbridge.FallbackQuota)
	for _, c := range codes {
		if !strings.Contains(relayjs.RelayDTS, `"`+c+`"`) {
			t.Errorf("relay.d.ts does not list the code %q", c)
		}
	}
}
