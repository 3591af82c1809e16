package relay

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// AnyInstance, as the instance of a credential, allows every instance.
const AnyInstance = "*"

// Config configures a Relay. Zero limits and durations take the defaults in
// Limits' documentation; every limit is enforced, and what happens at each is
// documented beside it.
type Config struct {
	// Key signs every welcome. Its public half is what runtimes and clients
	// pin. Required.
	Key ed25519.PrivateKey
	// AttachmentKey keys the MAC that binds attachment ids to a credential and
	// an instance; relays that share it accept each other's ids. Empty derives
	// it from Key's seed, so ids survive a restart with the same Key.
	AttachmentKey []byte

	// RuntimeCredentials maps a runtime's bearer credential to the instance
	// it may connect as (AnyInstance for any).
	RuntimeCredentials map[string]string
	// ClientCredentials maps a browser client's bearer credential to the
	// instance it may attach to (AnyInstance for any).
	ClientCredentials map[string]string
	// OriginPatterns are the browser origins (host patterns, as in
	// websocket.AcceptOptions) allowed besides the relay's own host. A
	// cross-origin upgrade from anywhere else is refused with HTTP 403. A
	// pattern with a scheme ("capacitor://localhost") allows that scheme
	// only; "null" allows the Origin null (file://) and nothing else
	// (acceptOptions).
	OriginPatterns []string

	// TLSCert and TLSKey name PEM files: a certificate chain (leaf first)
	// and its private key. With both set the relay is meant to be served
	// over TLS, and TLSConfig returns what the server in front of it listens
	// with. Both legs share that listener, so both get TLS 1.3 at least (the
	// contenox connector dials https only and requires 1.3; browsers have
	// spoken it for years) and HTTP/1.1 only (both legs are HTTP/1.1
	// upgrades, which HTTP/2 has no room for). Empty: plain HTTP, the
	// loopback default.
	TLSCert, TLSKey string
	// Hosts are the names (host patterns, path.Match syntax, with or without
	// a port) the browser leg serves, besides the loopback names (localhost,
	// *.localhost, 127.0.0.0/8, ::1), which are always served, and the listen
	// address ConfigureServer adds. An upgrade whose Host is none of them is
	// refused with HTTP 403, whatever its Origin: a page whose name was
	// rebound to the relay's address (DNS rebinding) sends its own name as
	// Host and Origin alike.
	Hosts []string

	// Name is the relay's name in welcomes, for diagnosis only.
	Name string
	// RetryAfter is the redial hint (seconds) put in every welcome; 0 leaves
	// the peer's own backoff in charge.
	RetryAfter int

	Limits Limits

	// Table routes frames; nil uses an in-memory table for one process.
	Table Table
	// Logger receives structured logs; nil uses slog.Default(). No
	// credential is ever logged.
	Logger *slog.Logger
}

// Limits bounds what one peer can make the relay hold or do. The defaults
// are chosen for a dev relay on a small machine; the numbers behind them are
// in the package documentation.
type Limits struct {
	// BrowserFrameBytes is the largest frame on the browser leg, either way
	// (default 1 MiB, relayleg.BrowserFrameBytes: the largest message the
	// client engine sends unless told otherwise). A larger message from an attached browser is read to
	// its end and discarded (see DrainBytes), then gets relay.error
	// frame_too_large and close 4413; a larger frame from the runtime for a
	// browser is dropped and logged (the producer must not exceed the leg).
	// The runtime leg's limit is librelay.MaxFrameBytes (16 MiB), fixed by
	// librelay.Reader.
	BrowserFrameBytes int
	// DrainBytes and DrainTimeout bound how much of an oversized browser
	// message past BrowserFrameBytes the relay reads and discards, and for
	// how long, before it answers (default 16 MiB, 10s). A browser reports
	// the close code only once it has sent the whole message, and a relay
	// that closed with part of it unread would reset the connection: the
	// browser would see 1006 and none of the relay.error. Past either bound
	// the socket is cut (the browser sees 1006): 16 MiB is the largest frame
	// the runtime leg carries, so a client that sends more is not a relaywasm
	// client, and 10s lets 16 MiB through an uplink of ~13 Mbit/s. An
	// oversized hello is not drained: HelloBytes bounds what an
	// unauthenticated peer can make the relay read.
	DrainBytes   int
	DrainTimeout time.Duration
	// HelloBytes is the largest first frame on either leg (default 4 KiB):
	// everything a peer can make the relay read before it has authenticated.
	HelloBytes int
	// HelloTimeout bounds the wait for a hello (default 10s).
	HelloTimeout time.Duration
	// HeaderBytes and HeaderTimeout bound a request's headers, in bytes and
	// in time (default 16 KiB, 10s), and PendingConns the connections not
	// yet upgraded (default 1024): what a peer can make the relay hold
	// before any credential is seen. They take effect through
	// Relay.ConfigureServer, on the http.Server that serves the relay.
	// 16 KiB is what Node.js allows by default and twice what nginx does per
	// line: a browser's upgrade request is well under 1 KiB plus its cookies.
	// Past HeaderBytes net/http answers 431; past PendingConns a connection
	// is answered 503 with Retry-After: 1 and closed unread (over TLS it is
	// closed unanswered: the answer would need a handshake). HeaderTimeout
	// also bounds a request that is not upgraded: its body, from when its
	// headers are read (neither leg reads one, and net/http drains what a
	// handler left unread before it answers), and each 32 KiB of its
	// response. A body not in by then is not waited for: the request is
	// answered and its connection closed; a response that makes no
	// progress for that long is cut. Until then the connection counts in
	// PendingConns.
	HeaderBytes   int
	HeaderTimeout time.Duration
	PendingConns  int
	// PendingConnsPerAddress bounds the connections not yet upgraded from
	// one client address (an IPv6 client's /64), so that one peer cannot
	// take every place in PendingConns and get everyone else 503 (default
	// PendingConns/16, 64 by default, at least 8 and at most PendingConns).
	// Past it a new connection from that address is answered 503 with
	// Retry-After: 1, saying so, and closed unread; it takes no place in
	// PendingConns. The address is the connection's own: X-Forwarded-For
	// is not trusted (anyone can send it, and the count is taken before a
	// header is read), so behind a reverse proxy every client has the
	// proxy's address; there, set it to PendingConns and bound clients in
	// the proxy.
	PendingConnsPerAddress int
	// PendingHellos bounds the browser sockets the relay holds before their
	// hello is judged: the browser leg reads the credential only with the
	// hello, so these are unauthenticated (default 1024). Past it an upgrade
	// is refused with HTTP 503 and Retry-After: 1 before any WebSocket
	// exists; a browser reads that as a failed connection and its client
	// redials with backoff, as after any drop. A socket counts from the
	// upgrade until it is welcomed, or, when refused, until its close has
	// ended. The runtime leg needs no such bound: its credential is checked
	// before the upgrade (HTTP 401).
	PendingHellos int
	// AttachmentsPerInstance bounds the attachment ids one instance holds,
	// live or in their grace period (default 256). At the bound, the id whose
	// socket dropped longest ago yields to a newcomer (it ends, and the
	// runtime gets acp.detach for it); when every id is held by a live
	// socket, the hello gets too_many_attachments and close 4430. The
	// default is the dev runtime's MaxSessions: a runtime that keeps fewer
	// sessions than the relay grants ids evicts live attachments' streams
	// when fresh ones arrive, so the smaller of the two is the one that
	// holds, and the relay's must not be the larger.
	AttachmentsPerInstance int
	// QueueFrames and QueueBytes bound each browser socket's send queue
	// (default 16,384 frames, 16 MiB, never less than one largest frame): at
	// least a runtime's whole retention (the dev runtime keeps 8,192 frames,
	// 8 MiB), so the replay after a resume fits, and room for a fast stream
	// to run well ahead of a slower browser, since nothing slows the runtime
	// down for it. A
	// frame for a full queue is never waited for room: the runtime leg's
	// reader is shared by every attachment of the instance. The socket is
	// shed at once: what it has queued is still written, then relay.error
	// slow_consumer and close 4429. The runtime retains what the socket
	// missed, and the client resumes from its cursor after it redials.
	QueueFrames int
	QueueBytes  int
	// RuntimeQueueFrames and RuntimeQueueBytes bound the queue towards each
	// runtime (default 4096 frames, 16 MiB). A browser whose frame does not
	// fit waits: its socket is not read until there is room.
	RuntimeQueueFrames int
	RuntimeQueueBytes  int
	// Grace is how long an attachment id stays reclaimable after its socket
	// dropped without a detach (default 2m); then acp.detach goes to the
	// runtime and the id ends. A hello naming the id that is refused
	// unknown_instance (its client redials while the instance has no
	// runtime) restarts it: a page that keeps knocking through a runtime's
	// outage keeps its attachment however long the outage lasts. The ids in
	// their grace stay bounded by AttachmentsPerInstance per instance (a
	// knock creates none, and they yield to live newcomers at that limit).
	Grace time.Duration
	// HeartbeatInterval is how long a peer may be silent before the relay
	// probes it (default 15s); HeartbeatTimeout how long the probe may go
	// unanswered before relay.error heartbeat_timeout and close 4408
	// (default 10s).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// TakeoverWait is how long a runtime's hello for an instance that
	// already has a runtime connected waits while the relay probes the
	// connected one (default 5s). When it answers, the newcomer is refused
	// with relay.error instance_taken; when it does not, it is closed with
	// heartbeat_timeout and the newcomer gets the instance. An incumbent on
	// another node sharing the Table is probed by its node, asked over the
	// bus (a Prober); one that does not answer is told heartbeat_timeout
	// too, once the newcomer's hold reaches its node, and the newcomer may
	// wait up to TakeoverWait plus 1s for the bus's round trip. Its node
	// then refuses other newcomers (instance_taken) for TakeoverWait, so
	// that of two on two nodes only the first is welcomed. 5s leaves the newcomer's own handshake timeout (10s in the
	// contenox connector and the dev runtime) room for the welcome.
	TakeoverWait time.Duration
	// CloseTimeout bounds how long a closing socket may take to drain its
	// last frames and close frame before it is cut (default 5s).
	CloseTimeout time.Duration
	// EndedIDs bounds how many ended attachment ids are remembered, so that a
	// hello naming one gets a fresh id instead (default 65536, ~6 MiB).
	EndedIDs int
}

// ErrConfig reports a Config New cannot run with.
var ErrConfig = errors.New("relay: bad config")

// loadTLS builds the server TLS config of Config.TLSCert and TLSKey, or nil
// when neither is set.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLSCert and TLSKey go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

func (l *Limits) setDefaults() {
	setDefault(&l.BrowserFrameBytes, relayleg.BrowserFrameBytes)
	setDefault(&l.DrainBytes, librelay.MaxFrameBytes)
	setDefault(&l.DrainTimeout, 10*time.Second)
	setDefault(&l.HelloBytes, 4<<10)
	setDefault(&l.HelloTimeout, 10*time.Second)
	setDefault(&l.HeaderBytes, 16<<10)
	setDefault(&l.HeaderTimeout, 10*time.Second)
	setDefault(&l.PendingConns, 1024)
	setDefault(&l.PendingConnsPerAddress, max(l.PendingConns/16, 8))
	l.PendingConnsPerAddress = min(l.PendingConnsPerAddress, l.PendingConns)
	setDefault(&l.PendingHellos, 1024)
	setDefault(&l.AttachmentsPerInstance, 256)
	setDefault(&l.QueueFrames, 16<<10)
	setDefault(&l.QueueBytes, 16<<20)
	l.QueueBytes = max(l.QueueBytes, l.BrowserFrameBytes)
	setDefault(&l.RuntimeQueueFrames, 4096)
	setDefault(&l.RuntimeQueueBytes, 16<<20)
	setDefault(&l.Grace, 2*time.Minute)
	setDefault(&l.HeartbeatInterval, 15*time.Second)
	setDefault(&l.HeartbeatTimeout, 10*time.Second)
	setDefault(&l.TakeoverWait, 5*time.Second)
	setDefault(&l.CloseTimeout, 5*time.Second)
	setDefault(&l.EndedIDs, 65536)
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// credHash is how a credential is held: the relay compares and MACs the
// digest, so the credential itself is not kept in memory after New.
type credHash [sha256.Size]byte

func hashCredential(cred string) credHash { return sha256.Sum256([]byte(cred)) }

// grants indexes credentials by digest.
type grants map[credHash]string

func newGrants(m map[string]string) grants {
	g := make(grants, len(m))
	for cred, instance := range m {
		g[hashCredential(cred)] = instance
	}
	return g
}

// allows reports whether the credential may use instance.
func (g grants) allows(h credHash, instance string) bool {
	granted, ok := g[h]
	return ok && (granted == AnyInstance || granted == instance)
}

// known reports whether the credential is known at all.
func (g grants) known(h credHash) bool {
	_, ok := g[h]
	return ok
}
