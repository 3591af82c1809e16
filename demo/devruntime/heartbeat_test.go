package devruntime

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// fakeRelay accepts runtime-leg connections and welcomes them, then does
// only what the test asks: here, nothing, so the runtime's heartbeat is
// never answered.
type fakeRelay struct {
	ln  net.Listener
	key ed25519.PrivateKey
}

func newFakeRelay(t *testing.T) *fakeRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	return &fakeRelay{ln: ln, key: key}
}

// accept takes one connection through upgrade and welcome.
func (f *fakeRelay) accept(t *testing.T, retryAfter int) (net.Conn, *librelay.Reader) {
	t.Helper()
	nc, err := f.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	br := bufio.NewReader(nc)
	if _, err := http.ReadRequest(br); err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + relayleg.UpgradeToken + "\r\n\r\n"))
	rd := librelay.NewReader(br)
	hello, err := rd.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	var h librelay.Hello
	h.UnmarshalJSON(hello.Payload)
	sig, _ := librelay.SignWelcome(f.key, h.Nonce, 1, hello.Instance)
	payload, _ := librelay.Welcome{ProtocolVersion: 1, Signature: sig, RetryAfterSeconds: retryAfter}.MarshalJSON()
	w := librelay.NewWriter(nc)
	w.WriteFrame(librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: hello.Instance, Payload: payload})
	return nc, rd
}

// A relay that stops answering is probed, dropped after the timeout, and
// redialled.
func TestRuntimeDropsSilentRelay(t *testing.T) {
	fr := newFakeRelay(t)
	rt, err := New(Config{
		Relay: "http://" + fr.ln.Addr().String(), Instance: "i", Credential: "c",
		RelayKey: fr.key.Public().(ed25519.PublicKey), Logger: slog.New(slog.DiscardHandler),
		HeartbeatInterval: 20 * time.Millisecond, HeartbeatTimeout: 40 * time.Millisecond,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rt.Run(ctx)
	_, rd := fr.accept(t, 0)
	f, err := rd.ReadFrame()
	if err != nil || f.Type != librelay.TypeHeartbeat || !f.IsRequest() {
		t.Fatalf("want a heartbeat probe, got %s (%v)", f.Type, err)
	}
	if _, err := rd.ReadFrame(); err == nil {
		t.Fatal("the runtime kept a relay that did not answer its probe")
	}
	fr.accept(t, 0) // the redial
}

func TestBackoff(t *testing.T) {
	r := &Runtime{cfg: Config{BackoffMin: 100 * time.Millisecond, BackoffMax: 2 * time.Second}}
	for attempt := range 40 {
		ceiling := min(r.cfg.BackoffMin<<min(attempt, 20), r.cfg.BackoffMax)
		for range 20 {
			if d := r.backoff(attempt, 0); d < 0 || d > ceiling {
				t.Fatalf("attempt %d waited %v, want within [0, %v]", attempt, d, ceiling)
			}
		}
	}
	for ra, want := range map[int]time.Duration{1: time.Second, 60: 2 * time.Second} {
		if d := r.backoff(0, ra); d != want {
			t.Fatalf("retry_after %d gave %v, want %v (clamped)", ra, d, want)
		}
	}
	r.cfg.BackoffMin = 3 * time.Second
	r.cfg.BackoffMax = 10 * time.Second
	if d := r.backoff(0, 1); d != 3*time.Second {
		t.Fatalf("retry_after below the floor gave %v", d)
	}
}
