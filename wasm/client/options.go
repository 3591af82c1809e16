package client

import (
	"context"
	"crypto/ed25519"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Options configures an attachment. URL, Instance, Credential and a message
// handler are required; every other field has a default, given beside it.
type Options struct {
	// URL is the relay's browser leg, for example "wss://relay.example/v1/attach":
	// an absolute ws:// or wss:// URL, or Attach refuses it with ErrBadOptions.
	URL string
	// Instance names the runtime to reach through the relay. It is a
	// librelay identifier (at most librelay.MaxIDBytes bytes of UTF-8, no
	// control characters); Attach refuses another with ErrBadOptions.
	Instance string
	// Credential returns the bearer credential the relay checks. It is called
	// on every dial, so a short-lived token can be refreshed between them.
	// An error that wraps ErrSuperseded ends the attachment with it, and
	// nothing is dialled: the caller knows the stream is another client's
	// now (relay.js, when another tab took the page's stream while the page
	// was in the back/forward cache), and a dial would take it back from
	// that client. Any other error fails the dial as ErrUnreachable, and the
	// attachment redials after the backoff.
	Credential func(ctx context.Context) (string, error)
	// RelayKey pins the relay's Ed25519 public key. When set, a welcome whose
	// signature does not verify ends the attachment with ErrBadRelaySignature.
	// Default: not pinned (the transport's TLS is the only relay authentication).
	RelayKey ed25519.PublicKey
	// Name tells this stream from others an application keeps on the same
	// relay and instance; the Store keys the cursor on (URL, Instance, Name).
	// Default "default".
	Name string
	// Store keeps the attachment id, the cursor and the transcript, so a new
	// Attachment with the same Key resumes where the last one stopped.
	// Default: a new MemoryStore (nothing survives this Attachment).
	Store Store
	// History is how many transcript entries (both directions) the Store keeps
	// for History(). Default 0: no transcript.
	History int
	// Transport dials the relay. Default: DefaultTransport, which is
	// coder/websocket natively; under js/wasm there is none and jsbridge's is
	// required.
	Transport Transport

	// OnMessage receives each ACP message in order. The cursor moves past a
	// sequenced message only after OnMessage returned nil for it; an error
	// stops delivery there and the message is fetched again with a resume
	// (an unsequenced one, which no resume brings again, is held and
	// delivered again after the redial backoff, with those after it).
	// Close and Detach wait for a call under way to return (so what it
	// accepted is saved); a handler that may take long should use
	// OnMessages and watch its ctx. So neither may be called from the
	// handler itself, which would wait for itself: call it from a
	// goroutine of its own (go a.Close()) and return. Set OnMessage or
	// OnMessages.
	OnMessage func(Message) error
	// OnMessages receives the deliverable messages of one inbound batch at
	// once and returns how many it handled, in order; it is what a bridge
	// to another runtime (JavaScript) uses to cross once per batch. It takes
	// precedence over OnMessage.
	//
	// Either runs on a goroutine of its own, one batch at a time, never
	// concurrently with itself; while it runs, the attachment goes on
	// answering heartbeats, sending and obeying Close and Detach, and only
	// the cursor waits. ctx ends when the attachment does: a handler still
	// waiting then (for a Promise, say) may give up, and what it returns
	// no longer counts. OnState and OnEvicted are called from the
	// attachment's goroutine, so they may run while the handler does: state
	// they share with it needs a lock. An eviction is still reported in its
	// place, after every message before it was handled.
	OnMessages func(ctx context.Context, batch []Message) (handled int, err error)
	// OnState is told of every change of connection state. Optional.
	//
	// OnState and OnEvicted run on the attachment's goroutine, which waits
	// for them, so they must return promptly and must not call SendACP,
	// Resume, Detach, Close or Abandon: each waits for that goroutine, so
	// from a callback it blocks until its ctx ends (Close and Abandon,
	// which take none, for ever). To send from a callback use StartSendACP,
	// which does not wait; call the others from a goroutine of their own
	// (go a.Close()), or after the callback has returned.
	OnState func(StateChange)
	// OnEvicted is told when content between two cursors is gone for good:
	// the application must refetch its state rather than append. Optional;
	// it runs as OnState does, and the same calls are barred from it.
	OnEvicted func(Eviction)

	// OnStart is called once, from Attach, with the attachment Attach
	// makes, before its first dial: SetOnline and Probe reach it from then
	// on, while Attach still waits for the relay's welcome. A platform
	// passes its network signals on to an attach still pending from there
	// (a page loaded offline, or while the relay is down, hears the
	// browser's online event). Optional; it must not block, and what else
	// it calls on the attachment waits for Attach.
	OnStart func(*Attachment)

	// Backoff paces redials after a dropped connection.
	Backoff Backoff
	// Heartbeat paces liveness probes of an open connection.
	Heartbeat Heartbeat
	// HandshakeTimeout bounds one dial plus the relay's welcome. Default 10s.
	HandshakeTimeout time.Duration
	// ResumeTimeout is how long a session.resume may go unanswered before
	// the runtime is taken not to resume (Resumable false): contenox as it
	// ships keeps no retention and ignores the request. Then queued sends
	// are released and the connection stays up; the next connection asks
	// again, and a sequenced frame or a session.resumed makes it resumable
	// again. Sends wait for the answer only on a connection that takes up a
	// stream (a reclaimed id), so that they follow what was missed; a new
	// stream has missed nothing, and its sends go out at once. Default 3s
	// (DefaultResumeTimeout), well below the heartbeat timeout, so a send
	// waits little longer than that for a resume that does not come: the
	// wait ends at the relay's ack of a heartbeat sent when the time is up,
	// after every frame the relay sent before it, so an answer that arrived
	// while the client was stalled is not taken for none. A runtime that
	// refuses the resume is taken not to resume at once, without the wait:
	// relay.error unsupported_type (it does not handle the type), or any
	// code but cursor_evicted and those that end a connection anyway
	// (unknown_instance, runtime_gone …).
	ResumeTimeout time.Duration
	// SendQueue bounds how many messages may wait while the attachment is
	// reconnecting; a send beyond it fails with ErrSendQueueFull. Default 256.
	SendQueue int
	// SendQueueBytes bounds the bytes of those messages. Default 4 MiB.
	SendQueueBytes int
	// MaxSendBytes is the largest frame SendACP sends, envelope and newline
	// included: a larger message fails at once with ErrFrameTooLarge. It is
	// the relay's limit on a frame from a browser, which discards a larger
	// one and closes the connection (4413), so the message would be
	// reported sent and lost. Default relayleg.BrowserFrameBytes (1 MiB,
	// the dev relay's default); raise it for a relay that takes more, up to
	// librelay.MaxFrameBytes.
	MaxSendBytes int
	// Agent names this client in its hello, for relay operators; nothing
	// branches on it. The identifier rules of Instance apply, so that it
	// neither corrupts an operator's log line nor makes the hello larger
	// than a relay reads before authenticating. Default "relaywasm".
	Agent string
}

// Backoff is exponential backoff with full jitter: the n-th redial after a
// drop waits a uniformly random time in [0, min(Max, Initial·2ⁿ)). Full
// jitter spreads a crowd of clients that lost the same relay at once.
type Backoff struct {
	// Initial bounds the first wait. Default 500ms.
	Initial time.Duration
	// Max bounds every wait. Default 30s.
	Max time.Duration
	// Stable is how long a connection must stay up before the next drop is
	// treated as a first one again. Default 1 minute.
	Stable time.Duration
	// MaxRetryAfter caps the relay's welcome.retry_after hint, so a relay
	// cannot park a client for longer than this. Default 5 minutes. The
	// client waits the hint and up to half as much again, at random.
	MaxRetryAfter time.Duration
}

// Heartbeat paces the client's relay.heartbeat probes. They are how a
// half-open socket (a phone that changed networks) is noticed at all.
type Heartbeat struct {
	// Interval between probes of an open connection. Default 15s.
	Interval time.Duration
	// Timeout for the relay's relay.ack; past it the connection is dropped
	// and redialled. Default 10s. A deadline that fires more than 250 ms late
	// (the client was not running: a stalled or suspended page) waits
	// 500 ms more, once, for an ack that arrived meanwhile to be read.
	Timeout time.Duration
}

// The defaults of the protocol page and the design.
const (
	DefaultName             = "default"
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultResumeTimeout    = 3 * time.Second
	DefaultSendQueue        = 256
	DefaultSendQueueBytes   = 4 << 20
	DefaultAgent            = "relaywasm"
)

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Store == nil {
		o.Store = NewMemoryStore()
	}
	if o.Transport == nil {
		o.Transport = DefaultTransport
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.ResumeTimeout <= 0 {
		o.ResumeTimeout = DefaultResumeTimeout
	}
	if o.SendQueue <= 0 {
		o.SendQueue = DefaultSendQueue
	}
	if o.SendQueueBytes <= 0 {
		o.SendQueueBytes = DefaultSendQueueBytes
	}
	if o.MaxSendBytes == 0 {
		o.MaxSendBytes = relayleg.BrowserFrameBytes
	}
	if o.Agent == "" {
		o.Agent = DefaultAgent
	}
	o.Backoff.setDefaults()
	o.Heartbeat.setDefaults()
	if o.OnMessages == nil && o.OnMessage != nil {
		o.OnMessages = perMessage(o.OnMessage)
	}
}

func (o *Options) check() error {
	switch {
	case o.URL == "":
		return wrap(ErrBadOptions, "URL is required", nil)
	case !webSocketURL(o.URL):
		return wrap(ErrBadOptions, `URL must be an absolute ws:// or wss:// URL, not "`+o.URL+`"`, nil)
	case o.Instance == "":
		return wrap(ErrBadOptions, "Instance is required", nil)
	case o.Credential == nil:
		return wrap(ErrBadOptions, "Credential is required", nil)
	case o.OnMessages == nil:
		return wrap(ErrBadOptions, "OnMessage or OnMessages is required", nil)
	case o.Transport == nil:
		return wrap(ErrBadOptions, "Transport is required in this build", nil)
	case o.RelayKey != nil && len(o.RelayKey) != ed25519.PublicKeySize:
		return wrap(ErrBadOptions, "RelayKey is not an Ed25519 public key", nil)
	case o.MaxSendBytes < 0 || o.MaxSendBytes > librelay.MaxFrameBytes:
		return wrap(ErrBadOptions, "MaxSendBytes is past librelay.MaxFrameBytes, or negative", nil)
	}
	return o.checkHello()
}

// webSocketURL reports whether s is a URL a WebSocket can be dialled at:
// ws or wss (any case), with a host and a port in range. Another (ftp://, a
// relative path, a typo) can never dial, and the attachment would redial it
// as unreachable for ever. It looks no further than the browser's URL
// parser does, which relay.js has already passed the URL through: a path
// Go would not parse ("%zz") or the slashes it forgives ("ws:/host") are
// the relay's and the browser's business. It reads the authority byte by
// byte: net/url would add 65 KB (gzip) to relay.wasm, and strings' trims,
// case folding and strconv's errors more, for a check relay.js has made.
func webSocketURL(s string) bool {
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return false
	}
	if scheme := lowerASCII(s[:colon]); scheme != "ws" && scheme != "wss" {
		return false
	}
	rest := s[colon+1:]
	for rest != "" && (rest[0] == '/' || rest[0] == '\\') {
		rest = rest[1:]
	}
	if end := strings.IndexAny(rest, `/\?#`); end >= 0 {
		rest = rest[:end]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:] // userinfo
	}
	host, port, ok := splitHostPort(rest)
	return ok && host != "" && validPort(port)
}

// lowerASCII is s with its ASCII letters lower case (strings.EqualFold
// would link Unicode's case folding tables, for a scheme).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// forbiddenHost is what the URL Standard forbids in a host (its forbidden
// host code points); an IPv6 address, in brackets, holds hex digits,
// colons and dots.
const forbiddenHost = "\x00\t\n\r #/:<>?@[\\]^|"

// splitHostPort splits an authority without userinfo into its host (an
// IPv6 address without its brackets) and port; ok is false for a host
// with a character no host has.
func splitHostPort(authority string) (host, port string, ok bool) {
	if authority != "" && authority[0] == '[' {
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return "", "", false
		}
		host, after := authority[1:end], authority[end+1:]
		for _, c := range []byte(host) {
			if !isHex(c) && c != ':' && c != '.' {
				return "", "", false
			}
		}
		if after == "" {
			return host, "", true
		}
		return host, after[1:], after[0] == ':'
	}
	host = authority
	if colon := strings.IndexByte(authority, ':'); colon >= 0 {
		host, port = authority[:colon], authority[colon+1:]
	}
	return host, port, strings.IndexAny(host, forbiddenHost) < 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validPort reports whether port is empty (the scheme's) or a decimal
// number a port can be, 0-65535 (strconv.ParseUint would link its errors'
// quoting, and with it Unicode's printable tables).
func validPort(port string) bool {
	n := 0
	for _, c := range []byte(port) {
		if c < '0' || c > '9' {
			return false
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return false
		}
	}
	return true
}

// checkHello refuses an Instance or Agent no hello can carry: longer than
// librelay's identifiers may be (MaxIDBytes), with a control character or
// invalid UTF-8. The relay would refuse every hello (malformed_frame), and
// the attachment would redial for ever, blaming the relay (ErrProtocol),
// over a mistake of the caller's. Within those bounds the hello stays under
// the relay's limit on a first frame (4 KiB, relay Limits.HelloBytes), escaped
// as badly as JSON can (TestLargestHelloFits).
func (o *Options) checkHello() error {
	if err := identifier(o.Instance); err != nil {
		return wrap(ErrBadOptions, "Instance is not a librelay identifier", err)
	}
	if err := identifier(o.Agent); err != nil {
		return wrap(ErrBadOptions, "Agent is not a librelay identifier", err)
	}
	return nil
}

// identifier checks s by librelay's rules for a frame's identifiers, as the
// frame's instance, where Instance goes.
func identifier(s string) error {
	return librelay.Frame{Type: librelay.TypeHello, Instance: s}.Validate()
}

func perMessage(fn func(Message) error) func(context.Context, []Message) (int, error) {
	return func(ctx context.Context, batch []Message) (int, error) {
		for i, m := range batch {
			if ctx.Err() != nil {
				return i, ctx.Err() // the attachment ended: the rest is not handled
			}
			if err := fn(m); err != nil {
				return i, err
			}
		}
		return len(batch), nil
	}
}

func (b *Backoff) setDefaults() {
	if b.Initial <= 0 {
		b.Initial = 500 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Stable <= 0 {
		b.Stable = time.Minute
	}
	if b.MaxRetryAfter <= 0 {
		b.MaxRetryAfter = 5 * time.Minute
	}
}

// delay is the wait before redial number attempt (0 for the first).
func (b Backoff) delay(attempt int) time.Duration {
	ceiling := b.Initial
	for i := 0; i < attempt && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, b.Max)
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// spread is how long to wait on a relay's retry_after hint (clamped by
// retryAfter): the hint, and up to half of it again at random. A relay
// shedding its sockets (a restart, a drain) names one moment to all of
// them, and clients that all came back at that moment would arrive as
// together as the load it shed.
func (b Backoff) spread(hint time.Duration) time.Duration {
	return hint + time.Duration(rand.Int64N(int64(hint/2)+1))
}

// retryAfter clamps a relay's hint to the client's own bounds. The hint is
// compared in seconds before it becomes a Duration: one of more than about
// 292 years overflows as nanoseconds, to a moment or to a negative wait.
func (b Backoff) retryAfter(seconds int) time.Duration {
	if time.Duration(seconds) > b.MaxRetryAfter/time.Second {
		return b.MaxRetryAfter
	}
	return time.Duration(seconds) * time.Second
}

func (h *Heartbeat) setDefaults() {
	if h.Interval <= 0 {
		h.Interval = 15 * time.Second
	}
	if h.Timeout <= 0 {
		h.Timeout = 10 * time.Second
	}
}
