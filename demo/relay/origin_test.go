package relay_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// The origins phone webviews load their pages from (Capacitor on iOS and
// Android, Ionic, Cordova's file://), allowed by the line an operator adds
// (the README's -origins), scheme included: each spelling gets in when
// named, and nothing else gets in by it — not the same host under another
// scheme, not another host under the same scheme, not "null" unless named,
// not an origin whose host is called null.
func TestWebviewOrigins(t *testing.T) {
	webview := []string{"capacitor://localhost", "https://localhost", "ionic://localhost", "null"}
	env := relaytest.Start(t, func(c *relay.Config) { c.OriginPatterns = webview })
	for _, origin := range webview {
		if code := upgrade(t, env, origin); code != http.StatusSwitchingProtocols {
			t.Errorf("Origin %s, named: HTTP %d, want 101", origin, code)
		}
	}
	for _, origin := range []string{
		"http://localhost", "capacitor://localhost:8080", "capacitor://evil.example", "ionic://localhost.evil.example",
		"https://localhost:443x", "file://", "http://null", "capacitor://null", "app.example", "http://app.example",
	} {
		if code := upgrade(t, env, origin); code != http.StatusForbidden {
			t.Errorf("Origin %s, not named: HTTP %d, want 403", origin, code)
		}
	}

	// Each spelling alone lets in that one, and "null" stays out until named.
	for _, origin := range webview {
		env := relaytest.Start(t, func(c *relay.Config) { c.OriginPatterns = []string{origin} })
		for _, other := range webview {
			want := http.StatusForbidden
			if other == origin {
				want = http.StatusSwitchingProtocols
			}
			if code := upgrade(t, env, other); code != want {
				t.Errorf("patterns [%s], Origin %s: HTTP %d, want %d", origin, other, code, want)
			}
		}
	}
}

// upgrade attempts a browser-leg upgrade with the Origin and returns the
// HTTP status of the answer.
func upgrade(t *testing.T, env *relaytest.Env, origin string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), relaytest.IOTimeout)
	defer cancel()
	b, resp, err := relaytest.DialBrowser(ctx, env.AttachURL, env.ClientToken, relaytest.DialOptions{Origin: origin})
	if err == nil {
		b.Close()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("Origin %s: no answer: %v", origin, err)
	}
	return resp.StatusCode
}
