package e2e

import (
	"fmt"
	"testing"
)

// A page may hold two Relays, one in worker mode and one on the main
// thread (two loadRelay calls): each runs a relay.wasm of its own, and
// neither sees the other's attachments. forget of a stream the other one
// holds is refused with bad_options as before, and its message names the
// holder as it is, another Relay of this page, in both directions. Before,
// it said another tab held the stream, which sent an app looking for a tab
// that was not there.
func TestForgetNamesTheOtherRelayOfThePage(t *testing.T) {
	t.Parallel()
	s := startStackServing(t, workerDir, 0)
	tb := openTab(t, newBrowser(t), "two relays", s.PageURL()+"blank.html")
	var modes []string
	tb.eval(`import("/relay.js").then(async (m) => {
		window.__r = { worker: await m.loadRelay({ worker: true }), main: await m.loadRelay({ worker: false }) };
		window.__stream = { url: "ws://" + location.host + "/v1/attach", instance: "demo", name: "mixed" };
		window.__outcome = (p) => p.then(() => "ok", (e) => (e instanceof m.RelayError ? e.code + ": " + e.message : "not a RelayError: " + e));
		return [__r.worker.mode, __r.main.mode];
	})`, &modes)
	if fmt.Sprint(modes) != "[worker main]" {
		t.Fatalf("the Relays run in modes %v, want [worker main]", modes)
	}
	want := `bad_options: forget: an attachment of another Relay of this page holds the stream "mixed": close() or detach() it first`
	for _, c := range []struct{ holder, forgetter string }{{"worker", "main"}, {"main", "worker"}} {
		var got struct {
			Name, Forget, After string
		}
		tb.eval(`(async () => {
			const att = await __r.`+c.holder+`.attach({ ...__stream, token: "dev-token", onMessage() {} });
			const forget = await __outcome(__r.`+c.forgetter+`.forget(__stream));
			await att.close();
			return { name: att.name, forget, after: await __outcome(__r.`+c.forgetter+`.forget(__stream)) };
		})()`, &got)
		if got.Name != "mixed" {
			t.Fatalf("the %s Relay attached %q, want mixed", c.holder, got.Name)
		}
		if got.Forget != want {
			t.Errorf("the %s Relay's forget of the stream the %s Relay holds: %q, want %q", c.forgetter, c.holder, got.Forget, want)
		}
		if got.After != "ok" {
			t.Errorf("the %s Relay's forget once the %s Relay closed: %q, want ok", c.forgetter, c.holder, got.After)
		}
	}
}
