package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// A reload in an engine that has Web Locks and no AbortSignal.timeout
// (Safari 15.4–15.8, Chrome 69–102, Firefox 96–99) gets its own slot back,
// as elsewhere: the page's first script deletes AbortSignal.timeout before
// relaywasm loads. tabs.js called it for every lock it waits for, which
// threw there: the reloaded page took worker-e2e#2, an empty conversation
// (and a page back from the back/forward cache ended its chat as
// superseded). In worker mode the page holds the worker's locks, so the
// page's engine is what counts there too.
func TestReloadWithoutAbortSignalTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"main", "worker"} {
		t.Run(mode, func(t *testing.T) {
			s := startStackServing(t, workerDir, 0)
			cdn := startCDN(t, s)
			page := servePage(t, func(*http.Request, http.Header) []byte {
				return fmt.Appendf(nil, `<!doctype html><html lang="en"><title>no AbortSignal.timeout</title>`+
					`<script>delete AbortSignal.timeout; window.__noTimeout = typeof AbortSignal.timeout === "undefined";</script>`+
					`<script type="module" src="%[1]s/preload.js"></script><script type="module" src="%[1]s/page.js"></script></html>`, cdn)
			})
			query := "?relay="
			if mode == "main" {
				query = "?main&relay="
			}
			tb := openTab(t, newBrowser(t), "no AbortSignal.timeout", page+query+url.QueryEscape(s.AttachURL()))
			workerReady(tb, mode)
			var first struct {
				Session, Name string
				NoTimeout     bool
			}
			tb.eval(`({session: __w.att.session, name: __w.att.name, noTimeout: window.__noTimeout})`, &first)
			if !first.NoTimeout || first.Name != "worker-e2e" {
				t.Fatalf("the first load: AbortSignal.timeout gone %v, attached as %q; want it gone and worker-e2e", first.NoTimeout, first.Name)
			}
			for i := range 2 {
				tb.do(fmt.Sprintf("reload %d", i+1), func(ctx context.Context) error { return tb.page.reload(ctx) })
				workerReady(tb, mode)
				var got struct{ Session, Name string }
				tb.eval(`({session: __w.att.session, name: __w.att.name})`, &got)
				if got.Name != "worker-e2e" || got.Session != first.Session {
					t.Fatalf("after reload %d the page has attachment %q as %q, want its own %q as worker-e2e", i+1, got.Session, got.Name, first.Session)
				}
			}
		})
	}
}
