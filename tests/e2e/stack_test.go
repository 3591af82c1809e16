package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/runtime"
	"github.com/relaywasm/relaywasm/relayleg"
)

// The dev defaults the page falls back to when its URL names nothing.
const (
	instance     = "demo"
	clientToken  = "dev-token"
	runtimeToken = "dev-runtime-token"
)

// startupWait bounds how long the stack may take to come up; a deadline
// against hangs, not a claim about speed.
const startupWait = 30 * time.Second

// stack is what `go run ./demo` runs, in-process: the dev relay and the page
// on one loopback address (so the page's default relay URL, its own host,
// is right) and the dev runtime dialled into the relay. The relay and the
// runtime can each be restarted, as separate processes would be.
type stack struct {
	t    *testing.T
	addr string // host:port of the relay and the page
	cfg  relay.Config
	page http.Handler
	rate float64 // the dev agent's chunks per second

	rl  *relay.Relay
	srv *http.Server
	rt  *runtimeProc
}

// runtimeProc is one life of the dev runtime.
type runtimeProc struct {
	rt     *runtime.Runtime
	cancel context.CancelFunc
	done   chan error
}

// startStack starts the relay, the page and a connected runtime whose agent
// streams rate chunks per second (0: as fast as the relay takes them).
func startStack(t *testing.T, rate float64) *stack {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{
		t:    t,
		rate: rate,
		page: noStore(http.FileServerFS(unionFS{os.DirFS(webDir), os.DirFS(moduleDir)})),
		cfg: relay.Config{
			Key:                key,
			RuntimeCredentials: map[string]string{runtimeToken: instance},
			ClientCredentials:  map[string]string{clientToken: instance},
			OriginPatterns:     []string{"127.0.0.1:*"},
			Logger:             logger("relay"),
		},
	}
	s.serveRelay("127.0.0.1:0")
	s.startRuntime()
	t.Cleanup(s.stop)
	return s
}

// URL is the chat page's address.
func (s *stack) URL() string { return "http://" + s.addr + "/" }

// serveRelay starts a relay with s.cfg (so always the same key) on addr,
// with the page beside it.
func (s *stack) serveRelay(addr string) {
	s.t.Helper()
	rl, err := relay.New(s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(relayleg.ConnectPath, rl)
	mux.Handle(relayleg.AttachPath, rl)
	mux.Handle("/", s.page)
	s.rl, s.addr = rl, ln.Addr().String()
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
}

func (s *stack) stopRelay() {
	if s.rl == nil {
		return
	}
	s.rl.Close() // its WebSockets are hijacked: the relay closes them
	s.srv.Close()
	s.rl, s.srv = nil, nil
}

// restartRelay stops the relay and starts it again with the same key on the
// same address, as a restarted relay process would. The runtime and the page
// have to notice and come back by themselves.
func (s *stack) restartRelay() {
	s.t.Helper()
	addr := s.addr
	s.stopRelay()
	s.serveRelay(addr)
}

// startRuntime starts a fresh runtime (no sessions, no retention) and waits
// until the relay has welcomed it.
func (s *stack) startRuntime() {
	s.t.Helper()
	rt, err := runtime.New(runtime.Config{
		Relay:      "http://" + s.addr,
		Instance:   instance,
		Credential: runtimeToken,
		RelayKey:   s.cfg.Key.Public().(ed25519.PublicKey),
		AgentRate:  s.rate,
		// Come back quickly after a relay restart; the page's own backoff
		// is what is under test.
		BackoffMin: 50 * time.Millisecond,
		BackoffMax: time.Second,
		Logger:     logger("runtime"),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &runtimeProc{rt: rt, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- rt.Run(ctx) }()
	s.rt = p
	select {
	case <-rt.Connected():
	case err := <-p.done:
		s.t.Fatalf("the runtime stopped before connecting: %v", err)
	case <-time.After(startupWait):
		s.t.Fatal("the runtime did not connect to the relay")
	}
}

func (s *stack) stopRuntime() {
	if s.rt == nil {
		return
	}
	s.rt.cancel()
	if err := <-s.rt.done; err != nil && !errors.Is(err, context.Canceled) {
		s.t.Errorf("runtime: %v", err)
	}
	s.rt = nil
}

// restartRuntime replaces the runtime with a fresh one that knows nothing of
// the streams before it: the page's cursor is evicted.
func (s *stack) restartRuntime() {
	s.t.Helper()
	s.stopRuntime()
	s.startRuntime()
}

func (s *stack) stop() {
	s.stopRuntime()
	s.stopRelay()
}

// unionFS serves the page's own files and, beside them, the built module.
type unionFS []fs.FS

func (u unionFS) Open(name string) (fs.File, error) {
	for _, f := range u {
		if file, err := f.Open(name); err == nil {
			return file, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// noStore keeps the browser from caching between tests' servers.
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// logger discards the stack's logs unless RELAYWASM_E2E_LOG is set.
func logger(part string) *slog.Logger {
	if os.Getenv("RELAYWASM_E2E_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("part", part)
}
