package bench

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// pageConfig is what the bench page needs to reach the relay by itself
// (window.bench.configure): the names of the frames it writes by hand come
// from librelay and relayleg rather than being spelled again in JavaScript.
type pageConfig struct {
	URL        string            `json:"url"`
	Instance   string            `json:"instance"`
	Token      string            `json:"token"`
	RelayKey   string            `json:"relayKey"`
	Protocols  []string          `json:"protocols"`
	Version    int               `json:"version"`
	Types      map[string]string `json:"types"`
	EchoMethod string            `json:"echoMethod"`
	History    int               `json:"history"`
}

func newPageConfig(st *stack.Stack, history int) pageConfig {
	c := st.Config()
	return pageConfig{
		URL: st.AttachURL(), Instance: c.Instance, Token: c.ClientToken,
		RelayKey:  librelay.FormatPublicKey(st.PublicKey()),
		Protocols: []string{relayleg.Subprotocol, relayleg.BearerSubprotocol(c.ClientToken)},
		Version:   librelay.ProtocolVersion,
		Types: map[string]string{
			"hello": librelay.TypeHello, "welcome": librelay.TypeWelcome, "acp": librelay.TypeACPMessage,
			"heartbeat": librelay.TypeHeartbeat, "ack": librelay.TypeAck, "resume": librelay.TypeResume,
		},
		EchoMethod: devruntime.EchoMethod,
		History:    history,
	}
}

// startStack runs what `go run ./demo` runs, serving the bench page and
// the module under test cross-origin isolated: only then does the page's
// performance.now() have 5 µs resolution rather than 100 µs, which made
// every round trip a multiple of 0.1 ms.
func startStack(ctx context.Context, webDir, moduleDir string) (*stack.Stack, error) {
	return stack.Start(ctx, stack.Config{
		WebDir: webDir, ModuleDir: moduleDir, CrossOriginIsolated: true,
		Logger: slog.New(slog.DiscardHandler),
	})
}

// session is one browser on one stack, with the bench page open and
// configured.
type session struct {
	cfg  Config
	st   *stack.Stack
	br   *browser
	tab  *tab
	page pageConfig
}

func openSession(ctx context.Context, cfg Config, moduleDir, tmp string) (*session, error) {
	st, err := startStack(ctx, cfg.webDir(), moduleDir)
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, st: st, page: newPageConfig(st, cfg.Sizes.History)}
	if s.br, err = startBrowser(cfg, tmp); err != nil {
		st.Close()
		return nil, err
	}
	if s.tab, err = s.openPage(wasmPage); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openPage opens the bench page in a new tab, checks it is cross-origin
// isolated when the stack serves it so, and configures it.
// The bench page comes in two: index.html loads relay.js's preload.js
// ahead of bench.js, as a page using relay.wasm would (its compile runs
// while bench.js and relay.js load); nopreload.html does not:
// the raw client's reloads do not compile relay.wasm, and relay.wasm's
// reloads without it say what preload.js is worth.
const (
	wasmPage      = ""
	noPreloadPage = "nopreload.html"
)

// openPage opens the bench page, page one of wasmPage and noPreloadPage.
func (s *session) openPage(page string) (*tab, error) {
	t, err := s.br.openTab(s.st.PageURL() + page)
	if err == nil {
		err = s.prepare(t)
	}
	return t, err
}

// prepare checks that a page just loaded is cross-origin isolated when the
// stack serves it so, and configures it.
func (s *session) prepare(t *tab) error {
	if s.st.Config().CrossOriginIsolated {
		if err := t.checkIsolated(); err != nil {
			return err
		}
	}
	return t.call(nil, "configure", s.page)
}

func (s *session) close() {
	s.br.close()
	s.st.Close()
}

// setup attaches the page's inbound clients and checks that the memory
// variant really runs without IndexedDB, and the others with it.
func (s *session) setup() error {
	var storage struct{ Wasm, Memory string }
	if err := s.tab.call(&storage, "setup"); err != nil {
		return err
	}
	if storage.Wasm != "indexeddb" || storage.Memory != "memory" {
		return fmt.Errorf("the page's stores are %q and %q, want indexeddb and memory", storage.Wasm, storage.Memory)
	}
	return nil
}

// browserFigures measures figures (1) to (3) in one Chromium against one
// stack: inbound throughput, round trips, reload to live.
func browserFigures(ctx context.Context, cfg Config, tmp string) ([]Row, error) {
	s, err := openSession(ctx, cfg, cfg.ModuleDir, tmp)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.setup(); err != nil {
		return nil, err
	}
	var rows []Row
	for _, fig := range []struct {
		name    string
		measure func() ([]Row, error)
	}{{FigInbound, s.inbound}, {FigRoundTrip, s.roundTrips}, {FigReload, s.reloads}} {
		if !cfg.wants(fig.name) {
			continue
		}
		r, err := fig.measure()
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, s.tab.healthy()
}
