package relay

import (
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
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
	hosts   atomic.Pointer[hosts] // names the browser leg serves (Config.Hosts, ConfigureServer)
	tls     *tls.Config           // nil: plain HTTP

	// takeover serializes installing a runtime for an instance
	// (takeover.go); never held while waiting for a peer.
	takeover sync.Mutex

	mu          sync.Mutex
	attachments map[route]*attachment
	perInstance map[string]int
	ended       tombstones
	yielded     string // set by yieldLocked, taken by attach under the same lock
	// owed holds, per instance, the acp.detach of attachments whose grace ran
	// out while no runtime was connected; the runtime gets them when it is
	// back, so it can drop those sessions instead of keeping them until its
	// own limit evicts them. At most AttachmentsPerInstance per instance:
	// no attachment can be made while the instance's runtime is away.
	owed   map[string][]string
	peers  map[peer]struct{}
	conns  map[closer]struct{} // every upgraded connection, for Close
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup

	// testHook, set only by tests (export_test.go), is called by a
	// runtime's welcome just before and just after it installs the runtime
	// in the table ("install", "installed"), and by its leave just before
	// and just after it removes it ("remove", "removed"), holding no lock a
	// browser attach takes: a test attaches sockets from it to put them on
	// either side of the change.
	testHook atomic.Pointer[func(step string)]

	hellos     atomic.Int64 // browser sockets not yet welcomed (Limits.PendingHellos)
	preUpgrade pendingConns // connections not yet upgraded (Limits.PendingConns, PendingConnsPerAddress; ConfigureServer)
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
	tlsConfig, err := loadTLS(cfg.TLSCert, cfg.TLSKey)
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
		attachments: make(map[route]*attachment), perInstance: make(map[string]int), owed: make(map[string][]string),
		ended: tombstones{max: cfg.Limits.EndedIDs},
		peers: make(map[peer]struct{}), conns: make(map[closer]struct{}),
		done: make(chan struct{}), tls: tlsConfig,
	}
	h := newHosts(cfg.Hosts)
	r.hosts.Store(&h)
	r.mux = http.NewServeMux()
	r.mux.HandleFunc(relayleg.ConnectPath, r.serveConnect)
	r.mux.HandleFunc(relayleg.AttachPath, r.serveAttach)
	if w, ok := cfg.Table.(Watcher); ok {
		w.Watch(r.hooks())
	}
	go r.sweep()
	return r, nil
}

// ServeHTTP serves both legs; any other path is 404.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.mux.ServeHTTP(w, req) }

// Limits returns the limits in force, defaults filled in.
func (r *Relay) Limits() Limits { return r.cfg.Limits }

// TLSConfig is the TLS config to serve the relay with (Config.TLSCert and
// TLSKey loaded; TLS 1.3 at least, HTTP/1.1 only), a fresh copy per call, or
// nil when the relay is served over plain HTTP:
//
//	ln, _ := net.Listen("tcp", addr)
//	if tc := rl.TLSConfig(); tc != nil {
//		ln = tls.NewListener(ln, tc)
//	}
//	http.Serve(ln, rl)
func (r *Relay) TLSConfig() *tls.Config {
	if r.tls == nil {
		return nil
	}
	return r.tls.Clone()
}

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

// wireSize is the length of f's wire form (librelay.AppendFrame) when no
// identifier needs an escape and the payload is compact, which is what
// routed frames are; queues count it against their byte bounds. An escape
// at most doubles an identifier's bytes and compacting only shrinks the
// payload, so maxWireSize bounds the encoding from above.
func wireSize(f librelay.Frame) int {
	n := len(`{"type":""}`) + len(f.Type) +
		member(`,"instance":""`, f.Instance) + member(`,"session":""`, f.Session) +
		member(`,"id":""`, f.ID) + member(`,"re":""`, f.ReplyTo) + member(`,"trace":""`, f.Trace)
	if f.Seq != 0 {
		n += len(`,"seq":`) + digits(f.Seq)
	}
	if len(f.Payload) > 0 {
		n += len(`,"payload":`) + len(f.Payload)
	}
	return n
}

func maxWireSize(f *librelay.Frame) int {
	return wireSize(*f) + len(f.Type) + len(f.Instance) + len(f.Session) + len(f.ID) + len(f.ReplyTo)
}

// member is the length of an omitempty string member, empty being its
// `,"name":""`.
func member(empty, v string) int {
	if v == "" {
		return 0
	}
	return len(empty) + len(v)
}

func digits(v uint64) int {
	n := 1
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// encodePool holds the buffers browser sockets' writers encode frames in;
// a socket holds one only while it writes a batch.
var encodePool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func putEncodeBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		*b = (*b)[:0]
		encodePool.Put(b)
	}
}

// step calls the test hook testHook, if a test set one.
func (r *Relay) step(name string) {
	if fn := r.testHook.Load(); fn != nil {
		(*fn)(name)
	}
}
