// Package stack is what `go run ./demo` runs, as a library: the dev relay
// and the chat page's static server on one loopback address, and the dev
// runtime dialled into the relay. The demo command, the end-to-end tests and
// the benchmarks all start the same stack through it, so what a test drives
// is what a person runs.
//
// The relay and the page share one address because the page's default relay
// URL is its own host: opened at PageURL, it attaches with no configuration.
// Each part can be restarted on its own, the way separate processes would
// be: RestartRelay brings the relay back on the same address with the same
// key (so attachment ids stay valid and the runtime and browsers reconnect by
// themselves), and RestartRuntime replaces the runtime with a fresh one that
// knows no stream (so clients see their cursors evicted).
//
//	s, err := stack.Start(ctx, stack.Config{WebDir: "demo/web", ModuleDir: "dist"})
//	if err != nil { … }
//	defer s.Close()
//	fmt.Println("open", s.PageURL())
package stack

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// The dev defaults: the chat page falls back to the same instance and client
// credential when its URL names none, so a page opened at PageURL attaches
// with no configuration.
const (
	DefaultAddr         = "127.0.0.1:0"
	DefaultInstance     = "demo"
	DefaultClientToken  = "dev-token"
	DefaultRuntimeToken = "dev-runtime-token"
)

// DefaultOrigins are the browser origins the relay accepts besides its own
// host: any loopback page, so a page served elsewhere on the machine (a
// framework's dev server) can attach too.
var DefaultOrigins = []string{"127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*"}

// Config says what to run. The zero value runs a relay on a free loopback
// port with the dev credentials, a fresh key, no page, and a connected
// runtime.
type Config struct {
	// Addr is where the relay and the page listen (default DefaultAddr, a
	// free loopback port; the chosen one is kept across RestartRelay).
	Addr string
	// WebDir is the chat page's directory, served at /; empty serves none.
	WebDir string
	// ModuleDir holds the built module (ModuleFiles), served at / beside
	// the page; empty serves none. Only those files are served from it: it
	// may hold other things (dist/ holds the dev relay's key file).
	ModuleDir string
	// CrossOriginIsolated serves the page and the module with
	// Cross-Origin-Opener-Policy: same-origin and
	// Cross-Origin-Embedder-Policy: require-corp, which make the page
	// cross-origin isolated (crossOriginIsolated === true). Chromium then
	// gives performance.now() 5 µs resolution instead of 100 µs, which a
	// benchmark timing sub-millisecond round trips needs. The page may then
	// load only same-origin resources, or cross-origin ones that opt in
	// with Cross-Origin-Resource-Policy or CORS; the module's files are
	// served beside the page, and WebSockets are not subject to the policy.
	CrossOriginIsolated bool

	// Instance, ClientToken and RuntimeToken default to the Default*
	// constants.
	Instance, ClientToken, RuntimeToken string
	// Key is the relay's signing key; nil generates one. It is kept across
	// RestartRelay, which is what keeps attachment ids valid.
	Key ed25519.PrivateKey

	// RelayOnly runs no runtime (the demo's -mode relay); RestartRuntime
	// still starts one.
	RelayOnly bool

	// EditRelay and EditRuntime, when set, adjust the parts' configs after
	// the stack has filled them in (limits, agent rate, retention, backoff,
	// origins). The edited relay.Config is reused by RestartRelay, and
	// EditRuntime runs again for every runtime started.
	EditRelay   func(*relay.Config)
	EditRuntime func(*devruntime.Config)

	// Logger receives the parts' logs, tagged part=relay or part=runtime;
	// nil uses slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	c.Addr = or(c.Addr, DefaultAddr)
	c.Instance = or(c.Instance, DefaultInstance)
	c.ClientToken = or(c.ClientToken, DefaultClientToken)
	c.RuntimeToken = or(c.RuntimeToken, DefaultRuntimeToken)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Key == nil {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		c.Key = key
	}
	return nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Stack is a running relay, page server and runtime. Its methods are safe
// for concurrent use, but restarts and Close are meant to come from one
// goroutine (a test's or main's).
type Stack struct {
	cfg   Config
	rcfg  relay.Config
	page  http.Handler
	errc  chan error
	rtTLS *tls.Config // what the stack's own runtime trusts; nil over plain HTTP
	mu    sync.Mutex
	addr  string
	relay *relayProc
	rt    *runtimeProc
}

// relayProc is one life of the relay: the relay and the server in front of it.
type relayProc struct {
	rl  *relay.Relay
	srv *http.Server
}

// runtimeProc is one life of the runtime.
type runtimeProc struct {
	rt     *devruntime.Runtime
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // what Run returned, set before done is closed
}

// ErrStack wraps a failure to start a part.
var ErrStack = errors.New("stack")

// Start starts the relay and the page on cfg.Addr and, unless RelayOnly, a
// runtime, and returns once the runtime is welcomed by the relay: a browser
// pointed at PageURL can attach at once. ctx bounds the start only; the
// parts run until Close.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, stackError(err)
	}
	s := &Stack{
		cfg:  cfg,
		page: newStatic(cfg.WebDir, cfg.ModuleDir, cfg.CrossOriginIsolated),
		errc: make(chan error, 1),
		rcfg: relay.Config{
			Key:                cfg.Key,
			RuntimeCredentials: map[string]string{cfg.RuntimeToken: cfg.Instance},
			ClientCredentials:  map[string]string{cfg.ClientToken: cfg.Instance},
			OriginPatterns:     DefaultOrigins,
			Logger:             cfg.Logger.With("part", "relay"),
		},
	}
	if cfg.EditRelay != nil {
		cfg.EditRelay(&s.rcfg)
	}
	if s.rcfg.TLSCert != "" {
		tc, err := runtimeTLS(s.rcfg.TLSCert)
		if err != nil {
			return nil, stackError(err)
		}
		s.rtTLS = tc
	}
	if err := s.startRelay(cfg.Addr); err != nil {
		return nil, err
	}
	if !cfg.RelayOnly {
		if err := s.startRuntime(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Config returns the config in force, defaults filled in (Addr is the
// address asked for; Addr() is the one listening).
func (s *Stack) Config() Config { return s.cfg }

// Addr is the host:port the relay and the page listen on.
func (s *Stack) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// HTTPURL is the relay's base URL (http://host:port, or https:// when the
// relay serves TLS), what a runtime dials.
func (s *Stack) HTTPURL() string { return s.scheme("http") + "://" + s.Addr() }

// AttachURL is the browser leg's WebSocket URL (ws://, or wss:// over TLS).
func (s *Stack) AttachURL() string { return s.scheme("ws") + "://" + s.Addr() + relayleg.AttachPath }

// TLS reports whether the relay and the page are served over TLS
// (relay.Config.TLSCert and TLSKey, set through EditRelay).
func (s *Stack) TLS() bool { return s.rtTLS != nil }

func (s *Stack) scheme(plain string) string {
	if s.TLS() {
		return plain + "s"
	}
	return plain
}

// PageURL is the chat page's address (HTTPURL with a trailing slash).
func (s *Stack) PageURL() string { return s.HTTPURL() + "/" }

// PinnedPageURL is PageURL with the relay's public key in the fragment
// (#key=…), where the page reads it and pins it: a welcome not signed by
// this relay's key is then refused. The fragment never reaches a server or
// its logs.
func (s *Stack) PinnedPageURL() string {
	return s.PageURL() + "#key=" + url.QueryEscape(librelay.FormatPublicKey(s.PublicKey()))
}

// PublicKey is the relay's public key, the one to pin; it does not change
// across RestartRelay.
func (s *Stack) PublicKey() ed25519.PublicKey { return s.cfg.Key.Public().(ed25519.PublicKey) }

// Relay is the relay of the current life (a new one after RestartRelay), or
// nil once closed.
func (s *Stack) Relay() *relay.Relay {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay == nil {
		return nil
	}
	return s.relay.rl
}

// Runtime is the current runtime, or nil when none runs.
func (s *Stack) Runtime() *devruntime.Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt == nil {
		return nil
	}
	return s.rt.rt
}

// Err receives the error of a part that stopped on its own: the server
// failing to accept, or the runtime ending with a fatal error (a bad relay
// signature, a refused credential). Stops the stack asks for are not
// reported. The demo exits on it; a test may ignore it.
func (s *Stack) Err() <-chan error { return s.errc }

func (s *Stack) fail(err error) {
	select {
	case s.errc <- err:
	default: // the first failure is the one worth reporting
	}
}

// RestartRelay stops the relay, closing every connection it holds, and
// starts a new one with the same config (the same key) on the same address,
// as a restarted relay process would. The runtime and browsers notice the
// drop and reconnect by themselves; RestartRelay does not wait for them.
func (s *Stack) RestartRelay() error {
	addr := s.Addr()
	s.stopRelay()
	return s.startRelay(addr)
}

// RestartRuntime replaces the runtime (starting one if none runs) with a
// fresh one that holds no session and no retention, and waits until the
// relay has welcomed it; ctx bounds the wait.
func (s *Stack) RestartRuntime(ctx context.Context) error {
	s.stopRuntime()
	return s.startRuntime(ctx)
}

// Close stops the runtime and the relay. The relay sends every browser
// relay.error shutting_down and close 4503 first.
func (s *Stack) Close() error {
	s.stopRuntime()
	s.stopRelay()
	return nil
}

// startRelay serves a new relay with s.rcfg, and the page, on addr.
func (s *Stack) startRelay(addr string) error {
	rl, err := relay.New(s.rcfg)
	if err != nil {
		return stackError(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		rl.Close()
		return listenError(addr, err)
	}
	if tc := rl.TLSConfig(); tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	mux := http.NewServeMux()
	mux.Handle(relayleg.ConnectPath, rl)
	mux.Handle(relayleg.AttachPath, rl)
	if s.page != nil {
		mux.Handle("/", s.page)
	}
	p := &relayProc{rl: rl, srv: &http.Server{Handler: mux,
		// TLS handshake failures and the like are a peer's problem, not the demo's.
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.With("part", "relay").Handler(), slog.LevelDebug)}}
	rl.ConfigureServer(p.srv, ln.Addr().String())
	s.mu.Lock()
	s.relay, s.addr = p, ln.Addr().String()
	s.mu.Unlock()
	go func() {
		if err := p.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.fail(stackError(err))
		}
	}()
	return nil
}

// listenError is a failed listen on addr, on one line (errors.Join put
// ErrStack on a line of its own, which the demo's log showed as "stack\n…"),
// saying what to do when another program holds the address: make demo's
// 127.0.0.1:8080 is often taken, and the fix is the demo's -addr.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: %s is taken by another program; pick another address with -addr "+
			"(make demo DEMO_FLAGS=-addr=127.0.0.1:8081): %w", ErrStack, addr, err)
	}
	return stackError(err)
}

// stackError is err as a failure to start a part: ErrStack and err on one
// line ("stack: …"; errors.Join put them on two, which a log shows as
// "stack\n…").
func stackError(err error) error { return fmt.Errorf("%w: %w", ErrStack, err) }

// stopRelay closes the listener first, so no new connection reaches a
// closing relay, then the relay: its connections are hijacked (WebSockets,
// the runtime's upgrade), which http.Server.Close does not close, so the
// relay ends them itself and waits for them.
func (s *Stack) stopRelay() {
	s.mu.Lock()
	p := s.relay
	s.relay = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.srv.Close()
	p.rl.Close()
}

// startRuntime starts a runtime against the current address and waits for
// its welcome.
func (s *Stack) startRuntime(ctx context.Context) error {
	cfg := devruntime.Config{
		Relay: s.HTTPURL(), Instance: s.cfg.Instance, Credential: s.cfg.RuntimeToken,
		RelayKey: s.PublicKey(), TLS: s.rtTLS, Logger: s.cfg.Logger.With("part", "runtime"),
	}
	if s.cfg.EditRuntime != nil {
		s.cfg.EditRuntime(&cfg)
	}
	set := func(p *runtimeProc) {
		s.mu.Lock()
		s.rt = p
		s.mu.Unlock()
	}
	return runRuntime(ctx, cfg, set, func(err error) {
		switch {
		case errors.Is(err, devruntime.ErrSuperseded):
			// Another runtime holds the instance now (a real contenox
			// runtime pointed at this relay, say): the demo's runtime
			// steps aside and the relay and the page keep serving.
			s.cfg.Logger.Warn("the demo's runtime stopped: another runtime took over the instance; the relay keeps serving", "instance", s.cfg.Instance)
		case err != nil:
			s.fail(stackError(err))
		}
	})
}

// runRuntime runs a dev runtime on cfg and waits until the relay welcomed
// it. set is given the running runtime before the wait, so that a Close
// meanwhile stops it; ended is called with what its Run returned.
func runRuntime(ctx context.Context, cfg devruntime.Config, set func(*runtimeProc), ended func(error)) error {
	rt, err := devruntime.New(cfg)
	if err != nil {
		return stackError(err)
	}
	// The first connection's channel, taken before Run: it stays closed once
	// that connection was welcomed, where a later Connected() is the next
	// connection's (a runtime welcomed and at once superseded had looked
	// like one never welcomed).
	welcomed := rt.Connected()
	runCtx, cancel := context.WithCancel(context.Background())
	p := &runtimeProc{rt: rt, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = rt.Run(runCtx)
		ended(p.err)
	}()
	set(p)
	select {
	case <-welcomed:
		return nil
	case <-p.done:
		select {
		case <-welcomed:
			return nil // welcomed, then stopped: ended has been told why
		default:
		}
		return stackError(fmt.Errorf("the runtime stopped before the relay welcomed it: %w", p.err))
	case <-ctx.Done():
		return stackError(ctx.Err())
	}
}

// stopRuntime cancels the runtime and waits for it to end.
func (s *Stack) stopRuntime() {
	s.mu.Lock()
	p := s.rt
	s.rt = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}

// runtimeTLS is what the stack's own runtime trusts when the relay serves
// TLS: the certificates in certFile (the chain the relay serves), verified
// under a name the leaf carries. The runtime dials the loopback address the
// relay listens on, so a certificate made for the machine's public name
// (or for localhost) serves the demo's runtime as it serves everyone else.
func runtimeTLS(certFile string) (*tls.Config, error) {
	b, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	var leaf *x509.Certificate
	for block, rest := pem.Decode(b); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
		if leaf == nil {
			leaf = c
		}
		pool.AddCert(c)
	}
	switch {
	case leaf == nil:
		return nil, fmt.Errorf("%s: no certificate", certFile)
	case len(leaf.DNSNames) > 0:
		return &tls.Config{RootCAs: pool, ServerName: leaf.DNSNames[0]}, nil
	case len(leaf.IPAddresses) > 0:
		return &tls.Config{RootCAs: pool, ServerName: leaf.IPAddresses[0].String()}, nil
	}
	return nil, fmt.Errorf("%s: the certificate names no host (no DNS or IP subject alternative name)", certFile)
}
