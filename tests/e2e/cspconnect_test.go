package e2e

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A page whose Content-Security-Policy leaves the relay out of connect-src
// (here connect-src 'self', the relay at another origin) cannot open its
// socket, and attach ends at once with bad_options saying that the page's
// policy does not allow the relay's URL, on the page's thread and in a
// worker (the policy sent with worker.js too, as a server that sets it on
// every response does), in every engine. Each engine had its own failure,
// none naming the policy: Chromium's WebSocket does not throw (the socket
// fails as an unreachable relay's does), so the attach redialled for ever;
// Firefox's throws a SecurityError with no message, WebKit's one saying
// "The operation is insecure.".
func TestContentSecurityPolicyWithoutTheRelay(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, policy, query, mode string }{
		{"connect-src, main", "connect-src 'self'", "?main", "main"},
		{"connect-src, worker", "connect-src 'self'", "", "worker"},
		{"default-src, main", "default-src 'self' 'wasm-unsafe-eval'", "?main", "main"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			u := startHeaded(t, s, func(_ bool, h http.Header) {
				h.Set("Content-Security-Policy", c.policy)
			})
			tb := openTab(t, newBrowser(t), "csp connect", u+c.query)
			// The engines report the refused connection as the page's
			// error, naming the relay's address.
			tb.page = allowing{tb.page, s.Addr()}
			workerReady(tb, c.mode)
			url := s.AttachURL()
			tb.eval(`(async () => {
				window.__csp = { states: [] };
				__w.relay.attach({
					url: `+strconv.Quote(url)+`, instance: "demo", token: "dev-token", name: "csp",
					onMessage() {}, onState(state) { __csp.states.push(state); },
				}).then(() => (__csp.code = "attached"), (e) => { __csp.code = e.code; __csp.message = e.message; });
			})(), true`, nil)
			tb.waitFor("the attach to settle", `__csp.code !== undefined`)
			var got struct {
				Code, Message string
				States        []string
			}
			tb.eval(`__csp`, &got)
			const says = "the page's Content-Security-Policy (connect-src) does not allow "
			// At once: no redial, which would be refused again.
			if got.Code != "bad_options" || !strings.Contains(got.Message, says+strconv.Quote(url)) || slices.Contains(got.States, "reconnecting") {
				t.Fatalf("attach ended with %s: %q (states %v); want bad_options at once saying %s%q", got.Code, got.Message, got.States, says, url)
			}
		})
	}
}

// A Report-Only policy that leaves the relay out reports the socket and
// lets it open: attach attaches, and so does the next attach to the same
// URL (relay.js, which remembers a relay the policy refused, does not take
// a report for a refusal).
func TestReportOnlyPolicyWithoutTheRelay(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	u := startHeaded(t, s, func(_ bool, h http.Header) {
		h.Set("Content-Security-Policy-Report-Only", "connect-src 'self'")
	})
	tb := openTab(t, newBrowser(t), "csp report only", u+"?main")
	tb.page = allowing{tb.page, s.Addr()}
	workerReady(tb, "main")
	var names []string
	tb.eval(`(async () => {
		const names = [];
		for (let i = 0; i < 2; i++) {
			const a = await __w.relay.attach({ url: `+strconv.Quote(s.AttachURL())+`, instance: "demo", token: "dev-token", name: "report", onMessage() {} });
			names.push(a.name);
			await a.close();
		}
		return names;
	})().catch((e) => [e.code + ": " + e.message])`, &names)
	if !slices.Equal(names, []string{"report", "report"}) {
		t.Fatalf("two attaches under a Report-Only policy: %q, want both attached to report", names)
	}
}
