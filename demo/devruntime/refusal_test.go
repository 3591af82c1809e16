package devruntime

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A runtime replaced by another connection for its instance stops instead
// of taking the instance back. (The dev relay no longer replaces a runtime
// that answers its probe; a relay that does, tells it superseded, as this
// fake one does.)
func TestSupersededIsFatal(t *testing.T) {
	fr := newFakeRelay(t)
	rt := fakeRelayRuntime(t, fr)
	done := make(chan error, 1)
	go func() { done <- rt.Run(context.Background()) }()
	nc, _ := fr.accept(t, 0)
	librelay.NewWriter(nc).WriteFrame(librelay.NewError(librelay.Frame{}, relayleg.CodeSuperseded, "taken over"))
	if err := <-done; !errors.Is(err, ErrSuperseded) {
		t.Fatalf("Run returned %v, want ErrSuperseded", err)
	}
}

// A hello refused with instance_taken (another connection holds the
// instance and answers) is not fatal: the runtime redials on its backoff,
// and is welcomed once the instance is free.
func TestInstanceTakenRedials(t *testing.T) {
	fr := newFakeRelay(t)
	rt := fakeRelayRuntime(t, fr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for range 3 {
		fr.refuse(t, relayleg.CodeInstanceTaken)
	}
	fr.accept(t, 0)
	<-rt.Connected()
}

func fakeRelayRuntime(t *testing.T, fr *fakeRelay) *Runtime {
	t.Helper()
	rt, err := New(Config{
		Relay: "http://" + fr.ln.Addr().String(), Instance: "i", Credential: "c",
		RelayKey: fr.key.Public().(ed25519.PublicKey), Logger: slog.New(slog.DiscardHandler),
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// refuse takes one connection through the upgrade and answers its hello
// with relay.error code, then closes it.
func (f *fakeRelay) refuse(t *testing.T, code string) {
	t.Helper()
	nc, err := f.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	if _, err := http.ReadRequest(br); err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + relayleg.UpgradeToken + "\r\n\r\n"))
	hello, err := librelay.NewReader(br).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	librelay.NewWriter(nc).WriteFrame(librelay.NewError(hello, code, "refused"))
}
