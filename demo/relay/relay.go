package relay

import (
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/relayleg"
)

// DefaultName is the relay's name in welcomes unless Config.Name is set.
const DefaultName = "relaywasm-dev-relay/1"

// Relay is the dev relay: an http.Handler serving the runtime leg at
// relayleg.ConnectPath and the browser leg at relayleg.AttachPath. It routes
// frames on (instance, session) and never parses a payload.
type Relay struct {
	cfg     Config
	log     *slog.Logger
	key     ed25519.PrivateKey
	ids     idMinter
	table   Table
	runtime grants
	client  grants
	mux     *http.ServeMux

	mu          sync.Mutex
	attachments map[route]*attachment
	perInstance map[string]int
	ended       tombstones
	peers       map[peer]struct{}
	conns       map[closer]struct{} // every upgraded connection, for Close
	closed      bool
	done        chan struct{}
	wg          sync.WaitGroup

	hellos atomic.Int64 // browser sockets not yet welcomed (Limits.PendingHellos)
}

// closer is a connection the relay can end on shutdown.
type closer interface{ shutdown() }

// New checks cfg and returns a relay ready to serve; it starts the heartbeat
// sweeper, which Close stops.
func New(cfg Config) (*Relay, error) {
	if len(cfg.Key) != ed25519.PrivateKeySize {
		return nil, errors.Join(ErrConfig, errors.New("Key must be an Ed25519 private key"))
	}
	ids, err := newIDMinter(cfg.AttachmentKey, cfg.Key.Seed())
	if err != nil {
		return nil, errors.Join(ErrConfig, err)
	}
	cfg.Limits.setDefaults()
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Table == nil {
		cfg.Table = NewMemTable()
	}
	r := &Relay{
		cfg: cfg, log: cfg.Logger, key: cfg.Key, ids: ids, table: cfg.Table,
		runtime: newGrants(cfg.RuntimeCredentials), client: newGrants(cfg.ClientCredentials),
		attachments: make(map[route]*attachment), perInstance: make(map[string]int),
		ended: tombstones{max: cfg.Limits.EndedIDs},
		peers: make(map[peer]struct{}), conns: make(map[closer]struct{}),
		done: make(chan struct{}),
	}
	r.mux = http.NewServeMux()
	r.mux.HandleFunc(relayleg.ConnectPath, r.serveConnect)
	r.mux.HandleFunc(relayleg.AttachPath, r.serveAttach)
	go r.sweep()
	return r, nil
}

// ServeHTTP serves both legs; any other path is 404.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Limits returns the limits in force, defaults filled in.
func (r *Relay) Limits() Limits { return r.cfg.Limits }

// PublicKey is the key runtimes and clients pin.
func (r *Relay) PublicKey() ed25519.PublicKey { return r.key.Public().(ed25519.PublicKey) }

// Close shuts the relay down: every browser socket gets relay.error
// shutting_down and close 4503, every runtime relay.error shutting_down, and
// Close returns once their goroutines have ended (each bounded by
// Limits.CloseTimeout). Attachment ids stay valid for a relay restarted with
// the same key; grace timers are dropped, so no acp.detach is sent for
// attachments that were merely cut off by the shutdown.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	close(r.done)
	conns := make([]closer, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	for _, a := range r.attachments {
		if a.grace != nil {
			a.grace.Stop()
		}
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.shutdown()
	}
	r.wg.Wait()
	return nil
}

// track registers an upgraded connection; it reports false once the relay is
// closing, and the caller then refuses the connection.
func (r *Relay) track(c closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	r.wg.Add(1)
	return true
}

func (r *Relay) untrack(c closer) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	r.wg.Done()
}

// enterHello takes a place among the pending hellos; false when all
// Limits.PendingHellos are taken.
func (r *Relay) enterHello() bool {
	if r.hellos.Add(1) > int64(r.cfg.Limits.PendingHellos) {
		r.hellos.Add(-1)
		return false
	}
	return true
}

func (r *Relay) leaveHello() { r.hellos.Add(-1) }

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// encodeMsg is AppendFrame for the browser leg (one frame per message).
func encodeMsg(f *librelay.Frame) ([]byte, error) { return librelay.AppendFrame(nil, f) }

// encodeLine is AppendFrame plus newline for the runtime leg.
func encodeLine(f *librelay.Frame) ([]byte, error) {
	b, err := librelay.AppendFrame(nil, f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
