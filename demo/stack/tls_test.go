package stack_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// With a certificate (what -tls-cert and -tls-key give the demo) the stack
// serves both legs over TLS: its URLs say https and wss, its own runtime
// connects over TLS 1.3 trusting the certificate it serves, and a browser
// that trusts the CA chats through it.
func TestTLS(t *testing.T) {
	cert := relaytest.NewCert(t, t.TempDir())
	s := start(t, stack.Config{EditRelay: func(c *relay.Config) { c.TLSCert, c.TLSKey = cert.CertFile, cert.KeyFile }})
	if !s.TLS() || !strings.HasPrefix(s.HTTPURL(), "https://") || !strings.HasPrefix(s.AttachURL(), "wss://") {
		t.Fatalf("TLS %v, urls %s %s", s.TLS(), s.HTTPURL(), s.AttachURL())
	}
	e := env(s)
	e.TLS = cert.ClientConfig()
	b := e.Attach(t, "")
	sess, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	if chunks, _, stop, err := b.Prompt(3, sess, "ping"); err != nil || stop != "end_turn" || len(chunks) != 1 {
		t.Fatalf("prompt over TLS: %q %q %v", chunks, stop, err)
	}
	if _, _, err := relaytest.DialRuntime(t.Context(), "http://"+s.Addr(), "x"); err == nil {
		t.Fatal("plain HTTP reached a relay served over TLS")
	}
}

// Another runtime for the demo's instance while the demo's own runtime is
// connected is refused (instance_taken), and the stack keeps serving: no
// failure on Err, and the demo's runtime still chats.
func TestOtherRuntimeRefused(t *testing.T) {
	s := start(t, stack.Config{})
	e := env(s)
	rt, _, err := relaytest.DialRuntime(t.Context(), e.HTTPURL, e.RuntimeToken)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Conn.Close()
	f, _, err := rt.Hello(e.Instance, librelay.ProtocolVersion)
	var refusal librelay.Error
	if err != nil || f.Type != librelay.TypeError || refusal.UnmarshalJSON(f.Payload) != nil || refusal.Code != relayleg.CodeInstanceTaken {
		t.Fatalf("second runtime: %s %s (%v), want relay.error instance_taken", f.Type, f.Payload, err)
	}
	chat(t, s)
	select {
	case err := <-s.Err():
		t.Fatalf("the stack failed: %v", err)
	default:
	}
}

// A superseded dev runtime (told so by a relay that hands an instance to
// each newcomer, as the dev relay used to) stops, and the demo does not go
// down with it: nothing on Err, and the relay still serves.
func TestSupersededRuntimeLeavesStackUp(t *testing.T) {
	fake := superseding(t)
	log := &warnings{seen: make(chan string, 8)}
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	s, err := stack.Start(ctx, stack.Config{
		Key: fake.key, Logger: slog.New(log),
		EditRuntime: func(c *devruntime.Config) { c.Relay = "http://" + fake.ln.Addr().String() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for waiting := true; waiting; {
		select {
		case msg := <-log.seen:
			waiting = !strings.Contains(msg, "another runtime took over")
		case <-time.After(startWait):
			t.Fatal("the stack never said its runtime stepped aside")
		}
	}
	select {
	case err := <-s.Err():
		t.Fatalf("a superseded runtime took the stack down: %v", err)
	default:
	}
	b, _, err := relaytest.DialBrowser(t.Context(), s.AttachURL(), s.Config().ClientToken, relaytest.DialOptions{Origin: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("the relay stopped serving: %v", err)
	}
	defer b.WS.CloseNow()
	if _, _, err := b.Hello(s.Config().Instance, "", librelay.ProtocolVersion); err != nil {
		t.Fatalf("the relay stopped answering: %v", err)
	}
}

// warnings passes the message of every warning to seen.
type warnings struct{ seen chan string }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	select {
	case w.seen <- r.Message:
	case <-time.After(startWait):
	}
	return nil
}

// fakeSuperseder welcomes one runtime-leg connection, signed with key, and
// then tells it superseded.
type fakeSuperseder struct {
	ln  net.Listener
	key ed25519.PrivateKey
}

func superseding(t *testing.T) *fakeSuperseder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSuperseder{ln: ln, key: newKey(t)}
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		nc.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + relayleg.UpgradeToken + "\r\n\r\n"))
		rd, w := librelay.NewReader(br), librelay.NewWriter(nc)
		hello, err := rd.ReadFrame()
		if err != nil {
			return
		}
		var h librelay.Hello
		h.UnmarshalJSON(hello.Payload)
		sig, _ := librelay.SignWelcome(f.key, h.Nonce, 1, hello.Instance)
		payload, _ := librelay.Welcome{ProtocolVersion: 1, Signature: sig}.MarshalJSON()
		w.WriteFrame(librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: hello.Instance, Payload: payload})
		w.WriteFrame(librelay.NewError(librelay.Frame{}, relayleg.CodeSuperseded, "taken over"))
		for {
			if _, err := rd.ReadFrame(); err != nil {
				return
			}
		}
	}()
	return f
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
