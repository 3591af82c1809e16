package conformance

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// dialAs opens the browser leg sending host as Host and the page's own
// origin (http://host) as Origin, as a page served from that name would.
func dialAs(t *testing.T, s *suite, host string) (*relaytest.Browser, *http.Response, error) {
	t.Helper()
	scheme := "http://"
	if s.TLS != nil {
		scheme = "https://"
	}
	b, resp, err := relaytest.DialBrowser(t.Context(), s.AttachURL, s.ClientToken,
		relaytest.DialOptions{Host: host, Origin: scheme + host, TLS: s.TLS})
	if err == nil {
		t.Cleanup(func() { b.WS.CloseNow() })
	}
	return b, resp, err
}

// port is the relay's port, for Host headers that name it.
func port(t *testing.T, s *suite) string {
	u, err := url.Parse(s.HTTPURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// DNS rebinding: a page whose name was rebound to the relay's address sends
// its own name as Host and as Origin. Origin equals Host, so an Origin check
// alone admits it; the relay must refuse an upgrade naming a Host it does
// not serve (HTTP 403), before any WebSocket exists.
func TestReboundHostRefused(t *testing.T) {
	s := newSuite(t, nil)
	s.Connect(t)
	_, resp, err := dialAs(t, s, "rebound.example:"+port(t, s))
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an upgrade with Host and Origin rebound.example: %v (%+v), want HTTP 403", err, resp)
	}
}

// The names a relay serves are accepted: by default its loopback names;
// with Config.Hosts, the names configured.
func TestServedHostsAccepted(t *testing.T) {
	needInProcess(t, "configures the relay's Hosts")
	s := newSuite(t, func(c *relay.Config) { c.Hosts = []string{"relay.example"} })
	s.Connect(t)
	p := port(t, s)
	for _, host := range []string{"relay.example:" + p, "relay.example", "127.0.0.1:" + p} {
		b, _, err := dialAs(t, s, host)
		if err != nil {
			t.Fatalf("Host %s: %v", host, err)
		}
		if f, _, err := b.Hello(s.Instance, "", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
			t.Fatalf("Host %s: hello answered %s %v", host, f.Type, err)
		}
	}
	if _, resp, err := dialAs(t, s, "other.example:"+p); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Host other.example with Hosts [relay.example]: %v, want HTTP 403", err)
	}
	d := newSuite(t, nil) // the default: loopback names only
	d.Connect(t)
	for _, host := range []string{"localhost:" + port(t, d), "127.0.0.1:" + port(t, d), "[::1]:" + port(t, d), "app.localhost:" + port(t, d)} {
		if _, _, err := dialAs(t, d, host); err != nil {
			t.Fatalf("loopback Host %s refused by default: %v", host, err)
		}
	}
}
