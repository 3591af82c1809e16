package natstable

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Config configures one node's Table.
type Config struct {
	// URL is the NATS server or cluster (nats://host:port, several
	// comma-separated). Required. Frames cross the bus as they are, so
	// the link is encrypted only with tls:// URLs or a server that
	// requires TLS; user:password@ in the URL authenticates the node.
	URL string
	// Name names the node in logs and in its NATS connection.
	Name string
	// Prefix starts every subject (default "relay"); relays sharing a NATS
	// account with other relay clusters use one each.
	Prefix string
	// Heartbeat is how often the node tells the others it is alive and
	// which runtimes it holds (default 500ms); Lease how long the others
	// wait without hearing from it before taking it for dead (default 3s):
	// its runtimes are then gone, and their browsers here get runtime_gone.
	Heartbeat, Lease time.Duration
	// Window is how many frames a stream keeps unacknowledged by the node
	// consuming it before Send waits (default 128); StallTimeout how long
	// it waits for room before dropping (default 5s). The consuming node
	// never waits on a slow socket (it sheds it at once), so a window left
	// full is a node that is behind, or gone; a socket whose frames were
	// dropped so is told by a tail (stream.payTail).
	Window       int
	StallTimeout time.Duration
	// PendingFrames bounds the frames waiting on this node for one
	// instance's sockets here, and for one runtime here (default 65536);
	// PendingBytes bounds the latter's bytes too (default 16 MiB). Past them
	// NATS drops, and tells the node, which takes it as a loss at once
	// (inbound.dropped).
	PendingFrames, PendingBytes int
	// Remember is how long the node remembers that an attachment it held
	// was reclaimed on another node, so that its grace running out does not
	// detach the attachment's new home (default 10m, longer than a grace).
	Remember time.Duration
	// ReconnectWait is the pause between attempts to reach NATS again
	// (default 250ms).
	ReconnectWait time.Duration
	// Logger: nil uses slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = "relay"
	}
	def(&c.Heartbeat, 500*time.Millisecond)
	def(&c.Lease, 3*time.Second)
	def(&c.Window, 128)
	def(&c.StallTimeout, 5*time.Second)
	def(&c.PendingFrames, 1<<16)
	def(&c.PendingBytes, 16<<20)
	def(&c.Remember, 10*time.Minute)
	def(&c.ReconnectWait, 250*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func def[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// ErrConfig reports a Config New cannot run with.
var ErrConfig = errors.New("natstable: bad config")

// Table is a relay.Table shared by the relay nodes on one NATS cluster. It
// is safe for concurrent use.
type Table struct {
	cfg      Config
	log      *slog.Logger
	nc       *nats.Conn
	sub      subjects
	id       uint64 // this node's id on the bus, random per Table
	ackEvery int
	hooks    atomic.Pointer[relay.Hooks]
	streamNo atomic.Uint64
	clock    atomic.Int64 // unix seconds, advanced by the heartbeat loop
	gaps     atomic.Int64
	epoch    int64 // last epoch handed out, to a hold or a claim; under mu

	mu        sync.RWMutex
	runtimes  map[string]*localRuntime // runtimes connected to this node
	holders   map[string]holder        // which node holds each runtime held elsewhere
	toRuntime map[string]*stream       // streams to those runtimes
	atts      map[route]*localAtt      // this node's sockets
	disp      map[string]*dispatcher   // per instance with sockets here
	toAtt     map[route]*stream        // streams to attachments elsewhere, from this node's runtimes
	streams   map[uint64]*stream       // every stream, by number, for acks
	nodes     map[uint64]int64         // other nodes: when last heard (unix nanos)
	recent    map[route]int64          // attachments that left this node: when
	moved     map[route]int64          // of those, reclaimed on another node since: when
	claims    map[route]uint64         // attachments another node claimed, or sent frames from: that node
	overflow  bool                     // claims reached maxRemembered: every session may be held elsewhere
	connected bool
	closed    bool
	done      chan struct{}
	ready     chan struct{} // closed once nc is set: NATS's callbacks may come first
	wg        sync.WaitGroup
	ctlSub    *nats.Subscription
	ackSub    *nats.Subscription
	// unheardSub takes NATS's word that a frame to a runtime reached nobody
	// (control.go, unheard).
	unheardSub *nats.Subscription
	probeSub   *nats.Subscription // other nodes' takeover probes (probe.go)
}

type route struct{ instance, session string }

// holder is a claim to an instance's runtime or to an attachment's socket:
// the node holding it and when it took it. A later claim wins; equal epochs
// are ordered by node id.
type holder struct {
	Node  uint64 `json:"n"`
	Epoch int64  `json:"e"`
}

func (h holder) newer(than holder) bool {
	return h.Epoch > than.Epoch || h.Epoch == than.Epoch && h.Node > than.Node
}

type localRuntime struct {
	ep    relay.Endpoint
	epoch int64
	in    *inbound
}

type localAtt struct {
	ep    relay.Endpoint
	since holder // this node, and when it took the socket: a claim older than that is stale
	in    *inbound
	disp  *dispatcher
}

// releaseLocked lets go of the attachment's subscription; with t.mu held.
func (la *localAtt) releaseLocked(t *Table, instance string) {
	if la.in == nil {
		return
	}
	la.in.release()
	t.leaveLocked(instance, la.disp, la.in.sub)
}

// New connects to NATS and returns the node's table; Close disconnects it.
// A node that cannot reach NATS at first keeps trying, and routes only its
// own runtimes' traffic meanwhile.
func New(cfg Config) (*Table, error) {
	if cfg.URL == "" {
		return nil, errors.Join(ErrConfig, errors.New("URL is required"))
	}
	cfg.setDefaults()
	var idb [8]byte
	rand.Read(idb[:])
	t := &Table{
		cfg: cfg, log: cfg.Logger, sub: subjects{cfg.Prefix}, id: binary.BigEndian.Uint64(idb[:]) | 1,
		ackEvery: max(1, cfg.Window/4),
		runtimes: make(map[string]*localRuntime), holders: make(map[string]holder),
		toRuntime: make(map[string]*stream), atts: make(map[route]*localAtt), disp: make(map[string]*dispatcher), toAtt: make(map[route]*stream),
		streams: make(map[uint64]*stream), nodes: make(map[uint64]int64),
		recent: make(map[route]int64), moved: make(map[route]int64), claims: make(map[route]uint64), done: make(chan struct{}), ready: make(chan struct{}),
	}
	t.log = t.log.With("node", t.Node())
	t.clock.Store(time.Now().Unix())
	nc, err := nats.Connect(cfg.URL,
		nats.Name(cfg.Name+" "+t.Node()),
		nats.NoEcho(), // a node routes its own traffic locally, never through the bus
		nats.MaxReconnects(-1), nats.ReconnectWait(cfg.ReconnectWait), nats.ReconnectJitter(cfg.ReconnectWait/2, cfg.ReconnectWait/2),
		nats.ReconnectBufSize(-1), // nothing is replayed from a stale buffer: receivers resume instead
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { t.disconnected(err) }),
		nats.ReconnectHandler(func(*nats.Conn) { t.reconnected() }),
		nats.ConnectHandler(func(*nats.Conn) { t.reconnected() }),
		nats.ErrorHandler(func(_ *nats.Conn, s *nats.Subscription, err error) {
			t.log.Warn("nats", "err", err)
			if errors.Is(err, nats.ErrSlowConsumer) && s != nil {
				t.slowConsumer(s)
			}
		}),
	)
	if err != nil {
		return nil, err
	}
	t.nc = nc
	close(t.ready)
	if t.ctlSub, err = nc.Subscribe(t.sub.control(), t.control); err == nil {
		t.ctlSub.SetPendingLimits(-1, 64<<20) // control traffic is small, and a lost claim would be wrong
		t.ackSub, err = nc.Subscribe(t.sub.ack(t.id), t.handleAck)
	}
	if err == nil {
		t.ackSub.SetPendingLimits(-1, 64<<20)
		t.unheardSub, err = nc.Subscribe(t.sub.unheardAll(t.id), t.unheard)
	}
	if err == nil {
		t.unheardSub.SetPendingLimits(-1, 64<<20)
		t.probeSub, err = nc.Subscribe(t.sub.probe(t.id), t.answerProbe)
	}
	if err != nil {
		nc.Close()
		return nil, err
	}
	if nc.IsConnected() {
		t.reconnected()
	}
	t.wg.Add(1)
	go t.beat()
	return t, nil
}

// Node is this node's id on the bus, as logs show it.
func (t *Table) Node() string { return nodeToken(t.id) }

// Conn is the table's NATS connection, for tests (closing it is what a
// node's death looks like to the others) and metrics.
func (t *Table) Conn() *nats.Conn { return t.nc }

// Gaps counts the losses receivers of this node have seen on the bus: each
// skip of a stream's counter, and each run of messages NATS dropped on a
// subscription past its pending limits (whose skip, when a later frame
// shows it, counts again).
func (t *Table) Gaps() int64 { return t.gaps.Load() }

// Watch implements relay.Watcher.
func (t *Table) Watch(h relay.Hooks) { t.hooks.Store(&h) }

// Close tells the other nodes this node's runtimes are gone and disconnects.
// Close the relay first: its runtimes' leaving is what releases them.
func (t *Table) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for inst, lr := range t.runtimes {
		t.publishControl(control{Kind: kindRelease, Instance: inst, Epoch: lr.epoch})
	}
	for _, s := range t.streams {
		s.close()
	}
	t.mu.Unlock()
	close(t.done)
	t.wg.Wait()
	t.nc.Flush()
	t.nc.Close()
	return nil
}

// Runtime implements relay.Table: the runtime on this node, or a stream to
// the node holding it.
func (t *Table) Runtime(instance string) relay.Endpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if lr := t.runtimes[instance]; lr != nil {
		return lr.ep // itself: the relay probes a local incumbent before a takeover
	}
	if s := t.toRuntime[instance]; s != nil {
		return s
	}
	return nil
}

// SetRuntime implements relay.Table: this node now holds instance's runtime,
// subscribes to its subject and tells the others, whose older hold (if any)
// ends superseded. It returns the runtime it replaces: the one on this node,
// or the stream to another node's; the relay tells the instance's sockets
// here runtime_gone, and every other node does so when the hold reaches it
// (holdLocked).
func (t *Table) SetRuntime(instance string, ep relay.Endpoint) relay.Endpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.runtimes[instance]
	t.epoch = max(t.epoch+1, time.Now().UnixNano())
	lr := &localRuntime{ep: ep, epoch: t.epoch}
	if old != nil {
		lr.in = old.in
	} else {
		in, err := t.subscribe(t.sub.runtime(instance), func() relay.Endpoint { return t.localRuntime(instance) }, nil)
		if err != nil {
			t.log.Error("cannot subscribe to a runtime's subject; only this node reaches it", "instance", instance, "err", err)
		}
		lr.in = in
	}
	t.runtimes[instance] = lr
	t.holders[instance] = holder{t.id, lr.epoch}
	var replaced relay.Endpoint
	if s := t.toRuntime[instance]; s != nil {
		delete(t.toRuntime, instance)
		t.dropStream(s)
		replaced = s
	}
	t.publishControl(control{Kind: kindHold, Instance: instance, Epoch: lr.epoch})
	if old != nil {
		return old.ep
	}
	return replaced
}

// Knock implements relay.Knocker: it tells the other nodes that a hello
// naming (instance, session) was refused here for want of a runtime.
func (t *Table) Knock(instance, session string) {
	t.publishControl(control{Kind: kindKnock, Instance: instance, Session: session})
}

// RemoveRuntime implements relay.Table, and tells the others the runtime
// is gone.
func (t *Table) RemoveRuntime(instance string, ep relay.Endpoint) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	lr := t.runtimes[instance]
	if lr == nil || lr.ep != ep {
		return false
	}
	t.dropRuntimeLocked(instance, lr)
	t.publishControl(control{Kind: kindRelease, Instance: instance, Epoch: lr.epoch})
	return true
}

func (t *Table) dropRuntimeLocked(instance string, lr *localRuntime) {
	delete(t.runtimes, instance)
	if h := t.holders[instance]; h.Node == t.id {
		delete(t.holders, instance)
	}
	if lr.in != nil {
		lr.in.release()
	}
	for k, s := range t.toAtt {
		if k.instance == instance {
			delete(t.toAtt, k)
			t.dropStream(s)
		}
	}
}

func (t *Table) localRuntime(instance string) relay.Endpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if lr := t.runtimes[instance]; lr != nil {
		return lr.ep
	}
	return nil
}

// Attachment implements relay.Table: the socket on this node, or a stream
// to the attachment's subject, which reaches the node holding the socket.
// A session no node is known to have held gets nil, so that a runtime's
// request for it is answered undeliverable as on a single relay; a session
// held elsewhere once keeps its stream (it may be in its grace there, and a
// sequenced frame then waits for the client's resume, as on a single relay).
func (t *Table) Attachment(instance, session string) relay.Endpoint {
	if session == "" {
		return nil
	}
	k := route{instance, session}
	t.mu.RLock()
	if la := t.atts[k]; la != nil {
		t.mu.RUnlock()
		return la.ep
	}
	s := t.toAtt[k]
	t.mu.RUnlock()
	if s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if la := t.atts[k]; la != nil {
		return la.ep
	}
	if s = t.toAtt[k]; s == nil {
		if !t.mayBeHeldLocked(k) {
			return nil // no node claimed it: the relay answers a request for it undeliverable, as a single relay does
		}
		if len(t.toAtt) >= maxStreams {
			return nil // frames for yet another session are dropped, as for a session nobody holds
		}
		s = t.newStream(t.sub.attachment(instance, session), instance, false)
		t.toAtt[k] = s
	}
	return s
}

// maxStreams bounds the streams a node keeps to attachments elsewhere; idle
// ones are dropped after a minute.
const maxStreams = 1 << 16

// SetAttachment implements relay.Table: this node holds the socket,
// subscribes to the attachment's subject, and tells the others with the
// socket's epoch, so that a node still holding an older socket for the id
// supersedes it, and one holding a newer socket keeps it.
func (t *Table) SetAttachment(instance, session string, ep relay.Endpoint) relay.Endpoint {
	k := route{instance, session}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.atts[k]
	t.epoch = max(t.epoch+1, time.Now().UnixNano())
	la := &localAtt{ep: ep, since: holder{t.id, t.epoch}}
	if old != nil {
		la.in, la.disp = old.in, old.disp
		if la.in != nil {
			la.in.takenOver()
		}
	} else {
		d := t.dispatcherLocked(instance)
		in, err := t.subscribeVia(d, t.sub.attachment(instance, session), func() relay.Endpoint { return t.localAtt(k) },
			func() { t.gapOn(k) })
		if err != nil {
			t.log.Error("cannot subscribe to an attachment's subject; only this node's runtimes reach it", "instance", instance, "err", err)
			t.leaveLocked(instance, d, nil)
		} else {
			la.in, la.disp = in, d
		}
	}
	t.atts[k] = la
	delete(t.recent, k)
	delete(t.moved, k)
	delete(t.claims, k)
	if s := t.toAtt[k]; s != nil {
		delete(t.toAtt, k)
		t.dropStream(s)
	}
	t.publishControl(control{Kind: kindClaim, Instance: instance, Session: session, Epoch: t.epoch})
	if old != nil {
		return old.ep
	}
	return nil
}

// RemoveAttachment implements relay.Table.
func (t *Table) RemoveAttachment(instance, session string, ep relay.Endpoint) bool {
	k := route{instance, session}
	t.mu.Lock()
	defer t.mu.Unlock()
	la := t.atts[k]
	if la == nil || la.ep != ep {
		return false
	}
	delete(t.atts, k)
	la.releaseLocked(t, instance)
	if len(t.recent) < maxRemembered {
		t.recent[k] = time.Now().UnixNano()
	}
	return true
}

// maxRemembered bounds the attachments remembered as having left (or
// moved); a relay's own ended ids are bounded the same way.
const maxRemembered = 1 << 16

// mayBeHeldLocked reports whether another node may hold k's socket: one
// claimed it, sent frames from it, or this node held it before; with t.mu
// held.
func (t *Table) mayBeHeldLocked(k route) bool {
	if t.overflow {
		return true
	}
	if _, ok := t.claims[k]; ok {
		return true
	}
	_, ok := t.recent[k]
	return ok
}

// claimedLocked records that node holds k's socket; with t.mu held. Past
// maxRemembered, every session counts as possibly held elsewhere, so no
// frame is refused for a claim the table could not keep.
func (t *Table) claimedLocked(k route, node uint64) {
	if _, ok := t.claims[k]; !ok && len(t.claims) >= maxRemembered {
		t.overflow = true
		return
	}
	t.claims[k] = node
}

// sawFrom records that a frame from k reached this node's runtime from
// node: k is held there. It runs before the runtime can answer the frame,
// so a reply never finds its session unknown because the claim (on the
// control subject, handled apart) is still on its way.
func (t *Table) sawFrom(k route, node uint64) {
	t.mu.RLock()
	n, ok := t.claims[k]
	t.mu.RUnlock()
	if ok && n == node {
		return
	}
	t.mu.Lock()
	if t.atts[k] == nil {
		t.claimedLocked(k, node)
	}
	t.mu.Unlock()
}

func (t *Table) localAtt(k route) relay.Endpoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if la := t.atts[k]; la != nil {
		return la.ep
	}
	return nil
}

func (t *Table) gapOn(k route) {
	if ep := t.localAtt(k); ep != nil {
		t.lostFrames(ep)
	}
}

// MovedAway implements relay.Mover: whether an attachment that was on this
// node has been reclaimed on another since.
func (t *Table) MovedAway(instance, session string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.moved[route{instance, session}]
	return ok
}

// dropStream closes s and forgets it; with t.mu held.
func (t *Table) dropStream(s *stream) {
	delete(t.streams, s.no)
	s.close()
}

func (t *Table) handleAck(m *nats.Msg) {
	a, ok := parseAck(m.Data)
	if !ok {
		return
	}
	t.mu.RLock()
	s := t.streams[a.stream]
	t.mu.RUnlock()
	if s != nil {
		s.ack(a)
	}
}

func (t *Table) callHooks(fn func(h *relay.Hooks)) {
	if h := t.hooks.Load(); h != nil {
		fn(h)
	}
}

// superseded is the End message for a route another node took over.
func (t *Table) superseded(eps []relay.Endpoint, what string) {
	for _, ep := range eps {
		t.callHooks(func(h *relay.Hooks) { h.End(ep, relayleg.CodeSuperseded, what) })
	}
}
