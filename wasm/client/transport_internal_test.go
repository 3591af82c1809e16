//go:build !js

package client

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Close releases the native transport's read loop even when the engine has
// stopped reading and the loop waits to hand over a message: it must not
// outlive its socket, holding the messages it read.
func TestWebSocketCloseEndsReadLoop(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		for range 400 { // more than the read-ahead holds
			if c.Write(r.Context(), websocket.MessageText, []byte(`{"type":"acp.message"}`)) != nil {
				return
			}
		}
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	// The read loop inherits the labels of the goroutine that dials, which
	// tells it from the loops of other tests' connections.
	labels := pprof.Labels("test", t.Name())
	var w *wsConn
	pprof.Do(context.Background(), labels, func(ctx context.Context) {
		conn, err := (&WebSocketTransport{}).Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		w = conn.(*wsConn)
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(w.in) < cap(w.in) {
		if time.Now().After(deadline) {
			t.Fatalf("the read-ahead holds %d of %d", len(w.in), cap(w.in))
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.Close(1000, "")
	for readLoopRunning(t.Name()) {
		if time.Now().After(deadline) {
			t.Fatal("the read loop outlived Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLoopRunning reports whether a wsConn read loop labelled test=name runs.
func readLoopRunning(name string) bool {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	label := `"test":"` + name + `"`
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	labelled := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			labelled = false
		case strings.HasPrefix(line, "# labels:"):
			labelled = strings.Contains(line, label)
		case labelled && strings.Contains(line, "(*wsConn).readLoop"):
			return true
		}
	}
	return false
}
