package devruntime_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// runUntilFatal runs a runtime that must stop on its own with a fatal error.
func runUntilFatal(t *testing.T, cfg devruntime.Config) error {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	rt, err := devruntime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), relaytest.IOTimeout)
	defer cancel()
	return rt.Run(ctx)
}

func TestBadSignatureIsFatal(t *testing.T) {
	env := relaytest.Start(t, nil)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	err := runUntilFatal(t, devruntime.Config{Relay: env.HTTPURL, Instance: env.Instance, Credential: env.RuntimeToken, RelayKey: other})
	if !errors.Is(err, devruntime.ErrBadRelay) {
		t.Fatalf("Run returned %v, want ErrBadRelay", err)
	}
}

func TestBadCredentialIsFatal(t *testing.T) {
	env := relaytest.Start(t, nil)
	err := runUntilFatal(t, devruntime.Config{Relay: env.HTTPURL, Instance: env.Instance, Credential: "wrong", RelayKey: env.Key})
	if !errors.Is(err, devruntime.ErrUnauthorized) {
		t.Fatalf("Run returned %v, want ErrUnauthorized", err)
	}
}

// The relay restarts mid-stream (the agent is paced, so the turn is still
// running when the client has read a third of it): the runtime redials, the client reclaims
// its attachment id and resumes from its cursor, and the turn arrives
// complete — every chunk once, in order — with seq gap-free.
func TestResumeAcrossRelayRestart(t *testing.T) {
	env := relaytest.Start(t, nil)
	rt := env.StartRuntime(t, func(c *devruntime.Config) { c.AgentRate = 2000 })
	b := env.Attach(t, "")
	sid, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	if err := b.ACP(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"count ` + strconv.Itoa(n) + `"}]}}`); err != nil {
		t.Fatal(err)
	}
	s := stream{t: t, cursor: 2}
	msgs := pump(b) // read concurrently, so the relay's close handshake completes
	if s.read(msgs, 200) {
		t.Fatal("the turn ended before the restart")
	}
	env.Restart(t)
	if s.read(msgs, n+1) {
		t.Fatal("the turn ended across the restart without a resume")
	}
	b2 := reattach(t, env, rt, b.Session)
	resume(t, b2, s.cursor)
	if !s.read(pump(b2), n+1) {
		t.Fatal("the stream ended before the turn did")
	}
	if len(s.chunks) != n {
		t.Fatalf("got %d chunks, want %d", len(s.chunks), n)
	}
	for i, c := range s.chunks {
		if c != strconv.Itoa(i+1)+"\n" {
			t.Fatalf("chunk %d is %q", i, c)
		}
	}
}

// pump reads a socket's ACP messages onto a channel, closed when the socket
// ends; it keeps reading past other frames so that a close completes.
func pump(b *relaytest.Browser) <-chan relaytest.RPC {
	ch := make(chan relaytest.RPC, 64)
	go func() {
		defer close(ch)
		for {
			f, err := b.Read()
			if err != nil {
				return
			}
			if m, err := relaytest.RPCOf(f); err == nil {
				ch <- m
			}
		}
	}()
	return ch
}

// stream is what a client has of the turn: its cursor and the chunks.
type stream struct {
	t      *testing.T
	cursor uint64
	chunks []string
}

// read consumes messages in seq order until the prompt's response (true),
// until it holds stop chunks, or until the socket fails (false).
func (s *stream) read(msgs <-chan relaytest.RPC, stop int) bool {
	s.t.Helper()
	for len(s.chunks) < stop {
		m, ok := <-msgs
		if !ok {
			return false
		}
		if m.Seq != s.cursor+1 {
			s.t.Fatalf("seq %d after cursor %d", m.Seq, s.cursor)
		}
		s.cursor = m.Seq
		if c, ok := relaytest.ChunkText(m); ok {
			s.chunks = append(s.chunks, c)
		} else if string(m.ID) == "3" {
			return true
		}
	}
	return false
}

// reattach reclaims id once the runtime is back at the restarted relay.
func reattach(t *testing.T, env *relaytest.Env, rt *devruntime.Runtime, id string) *relaytest.Browser {
	t.Helper()
	for {
		<-rt.Connected()
		b, _, err := relaytest.DialBrowser(context.Background(), env.AttachURL, env.ClientToken, relaytest.DialOptions{Origin: env.Origin})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.WS.CloseNow() })
		f, _, err := b.Hello(env.Instance, id, librelay.ProtocolVersion)
		if err == nil && f.Type == librelay.TypeWelcome {
			if f.Session != id {
				t.Fatalf("reclaim after restart got id %q, want %q", f.Session, id)
			}
			return b
		}
		time.Sleep(10 * time.Millisecond) // the runtime has not redialled yet
	}
}

// resume sends session.resume and skips live frames until session.resumed,
// which must continue right after the cursor.
func resume(t *testing.T, b *relaytest.Browser, cursor uint64) {
	t.Helper()
	payload, _ := librelay.Resume{AfterSeq: cursor}.MarshalJSON()
	if err := b.Send(librelay.Frame{Type: librelay.TypeResume, Instance: b.Instance, Session: b.Session, ID: "r1", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != librelay.TypeResumed {
			continue // a live frame past a gap: the client waits for the replay
		}
		var r librelay.Resumed
		if err := r.UnmarshalJSON(f.Payload); err != nil || f.ReplyTo != "r1" || r.FromSeq != cursor+1 || r.Evicted {
			t.Fatalf("resume after %d answered %s re %q", cursor, f.Payload, f.ReplyTo)
		}
		return
	}
}
