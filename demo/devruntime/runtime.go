package devruntime

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

// Config is what a runtime needs to reach its relay. Zero durations and
// limits take the defaults named beside them.
type Config struct {
	// Relay is the relay's base URL: http or ws for plain TCP, https or wss
	// for TLS. The runtime dials relayleg.ConnectPath under it.
	Relay string
	// Instance names this runtime at the relay.
	Instance string
	// Credential is the bearer credential the relay knows this runtime by.
	// It goes in the Authorization header only, never in a frame or a log.
	Credential string
	// RelayKey is the relay's pinned Ed25519 public key. Required: a welcome
	// that does not verify against it ends Run with ErrBadRelay.
	RelayKey ed25519.PublicKey
	// TLS configures https/wss dials; nil uses the system roots.
	TLS *tls.Config

	// AgentRate paces the dev agent's streamed chunks, in chunks per second;
	// 0 streams as fast as the connection takes them.
	AgentRate float64

	// NoResume makes the runtime behave as contenox v1.0.0 ships: it stamps
	// no seq, retains nothing and leaves session.resume unanswered (no
	// session.resumed, no relay.error). Clients must then work without
	// resumption; the demo's -resume=false sets it.
	NoResume bool

	// NoCancelRequest keeps the agent's $/cancel_request notifications
	// (sent when a turn waiting on a request to the client is cancelled)
	// from going out, so a turn ends with its request left open, as with a
	// runtime that does not send them: the turn's end is what says nothing
	// waits for the answer any more. For tests of clients.
	NoCancelRequest bool

	// CancelRequestFirst sends the agent's $/cancel_request of a request
	// before the response that ends its cancelled turn (stopReason
	// "cancelled"), which the agent's ACP library otherwise sends first as
	// often as not (it writes the cancel from a goroutine of its own). For
	// tests of clients: the runtime cancels the request while its turn
	// still runs. A cancelled turn's response waits for that cancel at most
	// cancelFirstWait.
	CancelRequestFirst bool

	// LoadForgets has session/load of a session the agent does not hold
	// answer as if it had loaded it, replaying nothing and holding nothing:
	// the next prompt on it is refused "unknown session" again, as by a
	// runtime whose load is broken. For tests of clients that recover a
	// forgotten session: they must not load and send again for ever.
	LoadForgets bool

	// RefuseOverlap answers a session/prompt that comes while a turn of its
	// session runs with stopReason "refusal" at once, the running turn
	// going on, as agents that hold ACP to one prompt at a time per session
	// do; by default the new prompt cancels the running turn. For tests of
	// clients: the newer prompt's response then comes before the older's.
	RefuseOverlap bool

	// RetainFrames and RetainBytes bound what each session keeps for resume
	// (default 8192 frames, 8 MiB). At the ~150 B of a `count` chunk the
	// frame bound binds first; at 1 KiB frames they meet.
	RetainFrames int
	RetainBytes  int
	// MaxSessions bounds the sessions (attachments) held at once (default
	// 256); a new one beyond it evicts the least recently used. With the
	// retention bounds that caps retained content at 2 GiB worst case. It
	// must be at least the relay's attachments per instance (the dev
	// relay's default is the same 256): the relay ends an id (acp.detach)
	// before it grants one past its own limit, so then only ids the relay
	// no longer holds are ever evicted here.
	MaxSessions int

	// HeartbeatInterval is how long the relay may be silent before it is
	// probed (default 15s); HeartbeatTimeout how long a probe may go
	// unanswered before the connection is dropped and redialled (default 10s).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// HandshakeTimeout bounds dial, upgrade and welcome (default 10s).
	HandshakeTimeout time.Duration
	// BackoffMin and BackoffMax bound the redial delay (default 500ms, 30s):
	// exponential with full jitter, and a welcome's retry_after clamped to them.
	BackoffMin time.Duration
	BackoffMax time.Duration

	// Logger receives structured logs; nil uses slog.Default().
	Logger *slog.Logger
}

// Fatal errors: Run returns them instead of redialling, because dialling
// again cannot change them.
var (
	// ErrBadRelay: the welcome's signature does not verify against RelayKey,
	// or the relay selected a protocol version this runtime does not speak.
	ErrBadRelay = errors.New("runtime: relay failed to prove itself")
	// ErrUnauthorized: the relay refused the credential.
	ErrUnauthorized = errors.New("runtime: relay refused the credential")
	// ErrSuperseded: another connection for this instance replaced this one;
	// redialling would only take it back and start a tug of war.
	ErrSuperseded = errors.New("runtime: another runtime took over the instance")
	// ErrConfig: the Config is incomplete.
	ErrConfig = errors.New("runtime: bad config")
)

func (c *Config) setDefaults() {
	setDefault(&c.RetainFrames, 8192)
	setDefault(&c.RetainBytes, 8<<20)
	setDefault(&c.MaxSessions, 256)
	setDefault(&c.HeartbeatInterval, 15*time.Second)
	setDefault(&c.HeartbeatTimeout, 10*time.Second)
	setDefault(&c.HandshakeTimeout, 10*time.Second)
	setDefault(&c.BackoffMin, 500*time.Millisecond)
	setDefault(&c.BackoffMax, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Runtime is a dev runtime: it dials a relay, serves one dev agent per
// attachment, and is the producer of every session's stream.
type Runtime struct {
	cfg Config
	log *slog.Logger

	conn atomic.Pointer[conn] // the live connection, nil between dials

	mu       sync.Mutex
	sessions map[string]*session
	up       chan struct{} // closed while a connection is live

	pause pause // Pause's: shared by every session's agent
}

// New checks cfg and returns a runtime that has not dialled yet; Run dials.
func New(cfg Config) (*Runtime, error) {
	if cfg.Relay == "" || cfg.Instance == "" || cfg.Credential == "" || len(cfg.RelayKey) != ed25519.PublicKeySize {
		return nil, errors.Join(ErrConfig, errors.New("Relay, Instance, Credential and RelayKey are required"))
	}
	if _, err := connectURL(cfg.Relay); err != nil {
		return nil, errors.Join(ErrConfig, err)
	}
	cfg.setDefaults()
	return &Runtime{
		cfg: cfg, log: cfg.Logger.With("instance", cfg.Instance),
		sessions: make(map[string]*session), up: make(chan struct{}),
	}, nil
}

// Run dials the relay and serves it until ctx ends (returning nil) or a fatal
// error (ErrBadRelay, ErrUnauthorized, ErrSuperseded). A dropped connection is
// redialled with exponential backoff and full jitter; sessions and their
// retention survive it, so clients resume where they were.
func (r *Runtime) Run(ctx context.Context) error {
	defer r.dropAll()
	for attempt := 0; ; attempt++ {
		welcomed, retryAfter, err := r.connectOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if isFatal(err) {
			r.log.Error("runtime stopped", "err", err)
			return err
		}
		if welcomed {
			attempt = 0
		}
		delay := r.backoff(attempt, retryAfter)
		r.log.Info("relay connection ended; redialling", "err", err, "delay", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

func isFatal(err error) bool {
	return errors.Is(err, ErrBadRelay) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrSuperseded)
}

// backoff is the delay before redial number attempt (0 after a connection
// that was welcomed): full jitter over an exponentially growing ceiling, or
// the relay's retry_after hint clamped to [BackoffMin, BackoffMax].
func (r *Runtime) backoff(attempt, retryAfter int) time.Duration {
	if retryAfter > 0 {
		return min(max(time.Duration(retryAfter)*time.Second, r.cfg.BackoffMin), r.cfg.BackoffMax)
	}
	ceiling := r.cfg.BackoffMin << min(attempt, 20)
	if ceiling <= 0 || ceiling > r.cfg.BackoffMax {
		ceiling = r.cfg.BackoffMax
	}
	return rand.N(ceiling + 1)
}

// PauseAt holds every agent's stream before its turn's chunk number chunk
// (counting from 0) and each after, until release is called; nothing is
// dropped, the chunks are only late. Tests arm it before a prompt so that
// the stream is under way, and not over, when they interrupt it, however far
// the browser lags behind: on a loaded machine a page seconds behind a
// runtime sending at a fixed rate saw a whole answer before the
// interruption came (see pause).
func (r *Runtime) PauseAt(chunk int) (release func()) { return r.pause.hold(chunk) }

// HoldSetup holds every agent's answers to initialize and session/new until
// release is called; held says how many it has held so far. Tests use it
// to have a page go away while its setup request is unanswered and the
// answer go out while it is away (release after it left): against a runtime
// that does not resume, that answer is then never sent again.
func (r *Runtime) HoldSetup() (held func() int, release func()) { return r.pause.setup.hold() }

// Connected returns a channel that is closed while the runtime holds a
// welcomed connection (a snapshot: call again after a drop).
func (r *Runtime) Connected() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

// setConn installs c as the live connection (nil when it ends) and flips
// the Connected channel.
func (r *Runtime) setConn(c *conn) {
	r.conn.Store(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c != nil {
		close(r.up)
	} else {
		r.up = make(chan struct{})
	}
}

// send hands a line to the live connection; with none it is dropped, and the
// client gets it from retention when it resumes.
func (r *Runtime) send(line []byte) {
	if c := r.conn.Load(); c != nil {
		c.send(line)
	}
}

// sendFrame encodes and sends an unsequenced frame.
func (r *Runtime) sendFrame(f librelay.Frame) {
	if line, err := appendLine(nil, &f); err == nil {
		r.send(line)
	}
}

// session returns the state of an attachment, creating it (and its agent)
// when create is set; past MaxSessions the least recently used is dropped.
func (r *Runtime) session(id string, create bool) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions[id]; ok || !create {
		return s
	}
	if len(r.sessions) >= r.cfg.MaxSessions {
		r.evictLocked()
	}
	s := newSession(&r.cfg, id, &r.pause, r.send, r.log.With("session", logID(id)))
	r.sessions[id] = s
	return s
}

// logID is how a session appears in logs: the session is the relay's
// attachment id, a capability, so logs carry the first 48 bits of its SHA-256
// (as the relay's logs do), never the id.
func logID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

func (r *Runtime) evictLocked() {
	var oldest *session
	for _, s := range r.sessions {
		if oldest == nil || s.used.Load() < oldest.used.Load() {
			oldest = s
		}
	}
	if oldest != nil {
		delete(r.sessions, oldest.id)
		go oldest.close()
		r.log.Info("session evicted", "session", logID(oldest.id))
	}
}

// dropSession ends an attachment's state: agent, turns and retention.
func (r *Runtime) dropSession(id string) {
	r.mu.Lock()
	s, ok := r.sessions[id]
	delete(r.sessions, id)
	r.mu.Unlock()
	if ok {
		s.close()
	}
}

func (r *Runtime) dropAll() {
	r.mu.Lock()
	all := r.sessions
	r.sessions = make(map[string]*session)
	r.mu.Unlock()
	for _, s := range all {
		s.close()
	}
}
