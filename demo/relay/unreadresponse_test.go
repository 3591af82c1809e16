package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A response its client stops reading holds its connection for
// HeaderTimeout past its last progress at most, so clients that ask for a
// large file served beside the relay (the demo's page, relay.wasm) and never
// read it cannot fill PendingConns for good and get every upgrade after them
// HTTP 503. Once they are let go, a runtime gets in, and a client that reads
// gets the whole file. (The client of a response cut is not told reliably
// when its connection closes, so the test does not look.)
func TestUnreadResponsesDoNotLockOut(t *testing.T) {
	const (
		bound = 3 * time.Second // long enough to see the held connections fill the bound
		size  = 64 << 20        // more than loopback's socket buffers take
	)
	_, key, _ := ed25519.GenerateKey(nil)
	rl, err := relay.New(relay.Config{Key: key, RuntimeCredentials: map[string]string{"runtime-token": "test"},
		Logger: slog.New(slog.DiscardHandler), Limits: relay.Limits{PendingConns: 2, HeaderTimeout: bound}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	page := bytes.Repeat([]byte("x"), size)
	mux := http.NewServeMux()
	mux.Handle(relayleg.ConnectPath, rl)
	mux.HandleFunc("/relay.wasm", func(w http.ResponseWriter, req *http.Request) {
		http.ServeContent(w, req, "relay.wasm", time.Time{}, bytes.NewReader(page)) // as http.FileServer does
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	rl.ConfigureServer(srv, ln.Addr().String())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := c.Write([]byte("GET /relay.wasm HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		held = append(held, c) // and never read
	}
	probe, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probe.SetDeadline(time.Now().Add(relaytest.IOTimeout))
	if resp, err := http.ReadResponse(bufio.NewReader(probe), nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("with %d responses unread: %v %+v, want HTTP 503 (they do not fill the bound?)", len(held), err, resp)
	}

	rt := waitAdmitted(t, "the runtime's upgrade", func() (*relaytest.Runtime, int, error) {
		return relaytest.DialRuntime(context.Background(), "http://"+addr, "runtime-token")
	})
	t.Cleanup(func() { rt.Conn.Close() })
	if f, _, err := rt.Hello("test", librelay.ProtocolVersion); err != nil || f.Type != librelay.TypeWelcome {
		t.Fatalf("runtime hello: %s %s %v", f.Type, f.Payload, err)
	}
	resp, err := http.Get("http://" + addr + "/relay.wasm")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != size {
		t.Fatalf("a client that reads got %d bytes (%v), want %d", n, err, size)
	}
}
