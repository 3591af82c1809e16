package stack_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
)

// startWait bounds a start; a deadline against hangs, not a claim about speed.
const startWait = 20 * time.Second

func start(t *testing.T, cfg stack.Config) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	cfg.Logger = slog.New(slog.DiscardHandler)
	s, err := stack.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// env describes the stack to relaytest's raw peers.
func env(s *stack.Stack) *relaytest.Env {
	c := s.Config()
	return &relaytest.Env{
		HTTPURL: s.HTTPURL(), AttachURL: s.AttachURL(), Instance: c.Instance,
		ClientToken: c.ClientToken, RuntimeToken: c.RuntimeToken, Key: s.PublicKey(),
		Origin: "http://127.0.0.1:1234",
	}
}

// chat attaches a raw browser and has the stack's dev agent answer a prompt,
// which shows the relay routes to a welcomed runtime.
func chat(t *testing.T, s *stack.Stack) {
	t.Helper()
	b := env(s).Attach(t, "")
	sess, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, stop, err := b.Prompt(3, sess, "hello there")
	if err != nil || stop != "end_turn" || len(chunks) == 0 {
		t.Fatalf("prompt: %d chunks, stop %q, %v", len(chunks), stop, err)
	}
}

// The zero config runs the dev defaults: a browser with the dev credential
// attaches to instance "demo" and the dev agent answers.
func TestDefaults(t *testing.T) {
	s := start(t, stack.Config{})
	c := s.Config()
	if c.Instance != "demo" || c.ClientToken != "dev-token" || c.RuntimeToken != "dev-runtime-token" {
		t.Fatalf("defaults: %q %q %q", c.Instance, c.ClientToken, c.RuntimeToken)
	}
	if s.AttachURL() != "ws://"+s.Addr()+"/v1/attach" || s.PageURL() != s.HTTPURL()+"/" {
		t.Fatalf("urls: %s %s %s", s.HTTPURL(), s.AttachURL(), s.PageURL())
	}
	pinned, err := url.Parse(s.PinnedPageURL())
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := url.ParseQuery(pinned.EscapedFragment())
	if key, err := librelay.ParsePublicKey(frag.Get("key")); err != nil || !key.Equal(s.PublicKey()) {
		t.Fatalf("PinnedPageURL %s does not carry the relay key (%v)", s.PinnedPageURL(), err)
	}
	chat(t, s)
}

// The page and the module are served at one root, uncached, .wasm as
// application/wasm; nothing else in the module directory is (dist/ holds
// the relay's key).
func TestStatic(t *testing.T) {
	web, mod := t.TempDir(), t.TempDir()
	write(t, filepath.Join(web, "index.html"), "<p>page</p>")
	write(t, filepath.Join(mod, "relay.wasm"), "\x00asm")
	write(t, filepath.Join(mod, "relay.js"), "export {}")
	write(t, filepath.Join(mod, "dev-relay.key"), "secret")
	s := start(t, stack.Config{WebDir: web, ModuleDir: mod, RelayOnly: true})

	cases := []struct{ path, body, ctype string }{
		{"/", "<p>page</p>", "text/html; charset=utf-8"},
		{"/relay.wasm", "\x00asm", "application/wasm"},
		{"/relay.js", "export {}", "text/javascript; charset=utf-8"},
	}
	for _, c := range cases {
		resp := get(t, s.HTTPURL()+c.path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != c.body || resp.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s: %d %q %q", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: Cache-Control %q, want no-cache", c.path, resp.Header.Get("Cache-Control"))
		}
		// Revalidated: unchanged, it is not sent again.
		req, _ := http.NewRequest(http.MethodGet, s.HTTPURL()+c.path, nil)
		req.Header.Set("If-Modified-Since", resp.Header.Get("Last-Modified"))
		again, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s revalidated with If-Modified-Since %q: %d, want 304", c.path, resp.Header.Get("Last-Modified"), again.StatusCode)
		}
	}
	if resp := get(t, s.HTTPURL()+"/dev-relay.key"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a file of the module directory that is not a module file was served: %d", resp.StatusCode)
	}
}

// CrossOriginIsolated puts the headers that isolate a page on the page and
// on the module's files, and only when asked for.
func TestCrossOriginIsolated(t *testing.T) {
	web, mod := t.TempDir(), t.TempDir()
	write(t, filepath.Join(web, "index.html"), "<p>page</p>")
	write(t, filepath.Join(mod, "relay.wasm"), "\x00asm")
	write(t, filepath.Join(mod, "relay.js"), "export {}")
	isolated := start(t, stack.Config{WebDir: web, ModuleDir: mod, RelayOnly: true, CrossOriginIsolated: true})
	plain := start(t, stack.Config{WebDir: web, ModuleDir: mod, RelayOnly: true})
	for _, path := range []string{"/", "/relay.wasm", "/relay.js"} {
		resp := get(t, isolated.HTTPURL()+path)
		if resp.StatusCode != 200 || resp.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" ||
			resp.Header.Get("Cross-Origin-Embedder-Policy") != "require-corp" {
			t.Errorf("isolated %s: %d, COOP %q, COEP %q", path, resp.StatusCode,
				resp.Header.Get("Cross-Origin-Opener-Policy"), resp.Header.Get("Cross-Origin-Embedder-Policy"))
		}
		resp = get(t, plain.HTTPURL()+path)
		if resp.Header.Get("Cross-Origin-Opener-Policy") != "" || resp.Header.Get("Cross-Origin-Embedder-Policy") != "" {
			t.Errorf("%s is isolated without being asked to be", path)
		}
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A relay restart keeps the address and the key: an attachment id granted
// before it is granted again after it, and the runtime comes back by
// itself. The hooks' limits hold in the restarted relay too.
func TestRestartRelay(t *testing.T) {
	s := start(t, stack.Config{EditRelay: func(c *relay.Config) { c.Limits.AttachmentsPerInstance = 7 }})
	addr, key := s.Addr(), s.PublicKey()
	b := env(s).Attach(t, "")
	id := b.Session
	b.Close() // a browser that answers the relay's close, so the restart need not wait out CloseTimeout
	if err := s.RestartRelay(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || !s.PublicKey().Equal(key) || s.Relay().Limits().AttachmentsPerInstance != 7 {
		t.Fatalf("after the restart: %s (was %s), same key %v, limit %d", s.Addr(), addr, s.PublicKey().Equal(key), s.Relay().Limits().AttachmentsPerInstance)
	}
	if got := attachOnceBack(t, s, id).Session; got != id {
		t.Fatalf("attachment id after the restart: %q, want %q back", got, id)
	}
	chat(t, s)
}

// attachOnceBack attaches asking for id back, retrying while the relay
// answers unknown_instance: the runtime is still redialling.
func attachOnceBack(t *testing.T, s *stack.Stack, id string) *relaytest.Browser {
	t.Helper()
	e := env(s)
	for deadline := time.Now().Add(startWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _, err := relaytest.DialBrowser(t.Context(), e.AttachURL, e.ClientToken, relaytest.DialOptions{Origin: e.Origin})
		if err != nil {
			t.Fatal(err)
		}
		f, nonce, err := b.Hello(e.Instance, id, librelay.ProtocolVersion)
		if err == nil && f.Type == librelay.TypeWelcome {
			t.Cleanup(func() { b.WS.CloseNow() })
			if err := relaytest.CheckWelcome(f, e.Key, nonce, e.Instance); err != nil {
				t.Fatal(err)
			}
			return b
		}
		b.WS.CloseNow()
	}
	t.Fatal("the runtime did not reconnect after the relay restart")
	return nil
}

// A runtime restart gives a runtime that knows no stream: the browser,
// dropped with runtime_gone, reclaims its attachment, and its resume from a
// cursor the new runtime never produced is answered cursor_evicted.
func TestRestartRuntime(t *testing.T) {
	s := start(t, stack.Config{RelayOnly: true})
	if s.Runtime() != nil {
		t.Fatal("RelayOnly started a runtime")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	if err := s.RestartRuntime(ctx); err != nil {
		t.Fatal(err)
	}
	first := s.Runtime()
	b := env(s).Attach(t, "")
	if _, err := b.StartChat(); err != nil {
		t.Fatal(err)
	}
	if err := s.RestartRuntime(ctx); err != nil || s.Runtime() == first {
		t.Fatalf("restart: %v (same runtime: %v)", err, s.Runtime() == first)
	}
	b = env(s).Attach(t, b.Session)
	b.Send(librelay.Frame{Type: librelay.TypeResume, ID: "r", Instance: b.Instance, Session: b.Session, Payload: []byte(`{"after_seq":2}`)})
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatal(err)
		}
		if f.ReplyTo == "r" {
			var e librelay.Error
			if f.Type != librelay.TypeError || e.UnmarshalJSON(f.Payload) != nil || e.Code != librelay.CodeCursorEvicted {
				t.Fatalf("resume after a runtime restart: %s %s, want cursor_evicted", f.Type, f.Payload)
			}
			return
		}
	}
}
