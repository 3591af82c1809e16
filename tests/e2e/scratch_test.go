package e2e

import (
	"testing"
	"time"
)

func TestScratchBadURL(t *testing.T) {
	for _, u := range []string{"relay.example/v1/attach", "ws://127.0.0.1:99999/v1/attach", "http://127.0.0.1:1/v1/attach"} {
		out := builtApp(t)
		s := startStackOf(t, out, 0, nil, logger())
		tb := openTab(t, newBrowser(t), "app", s.PageURL()+"#relay="+u)
		time.Sleep(4 * time.Second)
		var st any
		tb.eval(`({error: __app.error, ready: __app.ready, status: document.getElementById("status").textContent})`, &st)
		t.Logf("%s: %v", u, st)
	}
}
