package relay

import (
	"strconv"
	"sync"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// Two connections for one instance. The contenox connector treats every end
// of its link as transient and redials (relaylink.go: only unauthorized,
// unsupported_version and a bad relay signature stop it), so a relay that
// gave the instance to each newcomer would have two connectors take it from
// each other for as long as both run. The rule here settles instead: the
// connection holding the instance keeps it while it answers. A runtime's
// hello for an instance that has one is held while the relay probes the
// incumbent (relay.heartbeat, up to Limits.TakeoverWait):
//
//   - it answers (relay.ack): the newcomer gets relay.error instance_taken
//     and is closed. A connector reads any such refusal as transient and
//     redials on its own backoff, which a refusal never resets (contenox:
//     1s doubling to 30s, full jitter; the dev runtime: 500ms doubling to
//     30s), so the loser knocks less and less often and takes over the
//     moment the incumbent goes away;
//   - it does not, or its connection ends meanwhile: it is closed with
//     heartbeat_timeout and the newcomer is welcomed. This is the runtime
//     restarted behind a connection the relay had not yet seen die (a NAT
//     that dropped it, a machine that slept): it is back within the wait,
//     not after a heartbeat period.
//
// An incumbent on another node sharing the Table is probed the same way
// through that node (Prober, Hooks.Probe): the contenox connectors of one
// instance behind a load balancer land on different nodes as often as not,
// and each swap used to end every browser of the instance runtime_gone.
// Answered there: the newcomer here is refused instance_taken. Not answered
// (that node gone, the runtime frozen, the bus in trouble): the newcomer is
// welcomed, and the incumbent is told heartbeat_timeout by its node when
// this node's hold reaches it, as on one relay (endFromAfar; superseded if
// its node never probed it: gone, or of an earlier version). Of several
// newcomers on several nodes that find the incumbent silent at once, only
// the first is told so by its node (yield); the others are refused
// instance_taken, as on one relay, where they would probe the first and
// find it answering. A table that cannot probe (not a Prober) has the
// newcomer take over at once, as before.

// claim installs c as its instance's runtime by the rule above, or refuses
// it; it reports whether c was welcomed.
func (c *runtimeConn) claim(hello librelay.Frame, v int, sig []byte) bool {
	deadline := time.Now().Add(c.r.cfg.Limits.TakeoverWait)
	var silent Endpoint // an incumbent that did not answer its probe
	for {
		c.r.takeover.Lock()
		if c.closing.Load() { // the relay shut down while c waited
			c.r.takeover.Unlock()
			return false
		}
		cur := c.r.table.Runtime(c.instance)
		inc, local := cur.(*runtimeConn)
		_, remote := c.r.table.(Prober)
		// A newcomer on another node was told first that it may take
		// over the silent incumbent: it is the one welcomed, as the
		// first newcomer is on one relay.
		yielded := local && cur == silent && inc.contest.grantedWithin(c.r.cfg.Limits.TakeoverWait)
		if !yielded && (cur == nil || cur == silent || !local && !remote) {
			c.welcome(hello, v, sig, silent)
			c.r.takeover.Unlock()
			return true
		}
		c.r.takeover.Unlock()
		// Another newcomer may have won meanwhile: it has just been
		// welcomed, so it gets a probe too, within what is left of the wait.
		if !yielded && time.Now().Before(deadline) && !c.answers(cur, deadline) {
			silent = cur
			continue
		}
		break
	}
	c.refuse(hello, relayleg.CodeInstanceTaken, "another connection holds this instance and answers heartbeats; redial later")
	return false
}

// answers probes the incumbent cur, a connection of this relay or (through
// a Prober table) of another node, and reports whether it answered before
// deadline.
func (c *runtimeConn) answers(cur Endpoint, deadline time.Time) bool {
	if inc, ok := cur.(*runtimeConn); ok {
		return inc.contest.answeredBy(inc, deadline)
	}
	p, ok := c.r.table.(Prober)
	return ok && p.ProbeRuntime(c.instance, cur, deadline)
}

// challenge is a runtime connection's outstanding takeover probe: several
// newcomers waiting on one incumbent share one probe.
type challenge struct {
	mu    sync.Mutex
	n     int
	id    string        // the outstanding probe's request id
	ans   chan struct{} // closed when it is answered or the connection ends; nil when none is out
	ended bool
	// granted: when a newcomer on another node was told this connection
	// did not answer, and so may take it over (yield).
	granted time.Time
}

// yield: c did not answer the probe another node asked for (Hooks.Probe)
// on behalf of a newcomer there. It reports whether that newcomer may take
// the instance over. On one relay the first newcomer to find the incumbent
// silent is welcomed and every later one probes it, finds it answering,
// and is refused instance_taken; across nodes each newcomer's node would
// be told "not answered" by the same shared probe, all would be welcomed,
// and all but one superseded when the holds settled, every browser of the
// instance told runtime_gone once per newcomer. So the holder's node lets
// the first newcomer (here or elsewhere, under the takeover lock) have the
// instance and answers "alive" to the others for TakeoverWait: by then the
// first is welcomed and probed through its own node, or gone (its hello
// abandoned), and the next newcomer's probe decides afresh.
func (c *runtimeConn) yield() bool {
	c.r.takeover.Lock()
	defer c.r.takeover.Unlock()
	switch cur := c.r.table.Runtime(c.instance); cur {
	case nil:
		return true // c has gone, and nobody took its place
	case Endpoint(c):
		return c.contest.grant(c.r.cfg.Limits.TakeoverWait)
	default:
		return false // a newcomer here, or a newer hold from elsewhere, has just taken it
	}
}

// grant reports whether nobody was granted the takeover within wait, and
// if so grants it now.
func (ch *challenge) grant(wait time.Duration) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.granted.IsZero() && time.Since(ch.granted) < wait {
		return false
	}
	ch.granted = time.Now()
	return true
}

// grantedWithin reports whether a newcomer elsewhere was granted the
// takeover within wait.
func (ch *challenge) grantedWithin(wait time.Duration) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return !ch.granted.IsZero() && time.Since(ch.granted) < wait
}

// answeredBy probes c's connection (unless a probe is already out) and
// reports whether it answered before deadline; a connection that ends
// first has not.
func (ch *challenge) answeredBy(c *runtimeConn, deadline time.Time) bool {
	ch.mu.Lock()
	if ch.ended {
		ch.mu.Unlock()
		return false
	}
	ans := ch.ans
	if ans == nil {
		ch.n++
		ch.id, ch.ans = "takeover-"+strconv.Itoa(ch.n), make(chan struct{})
		ans = ch.ans
		c.sendControl(&librelay.Frame{Type: librelay.TypeHeartbeat, ID: ch.id})
	}
	ch.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ans:
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return !ch.ended
	case <-t.C:
		return false
	}
}

// answered takes a relay.ack from the connection.
func (ch *challenge) answered(re string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.ans != nil && re == ch.id {
		close(ch.ans)
		ch.ans, ch.id = nil, ""
	}
}

// end releases whoever waits on the connection, which is ending.
func (ch *challenge) end() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.ended = true
	if ch.ans != nil {
		close(ch.ans)
		ch.ans = nil
	}
}

// endFromAfar closes c for a shared table (Hooks.End). Superseded by
// another node's newer hold after c failed a probe that node asked for
// (yield), c is the silent incumbent it took over from, and is told
// heartbeat_timeout, as one relay tells it: a dev runtime takes superseded
// as final, and one that froze briefly (a laptop that slept) would stop for
// good instead of redialling.
func (c *runtimeConn) endFromAfar(code, message string) {
	if code == relayleg.CodeSuperseded && c.contest.yielded() {
		code, message = relayleg.CodeHeartbeatTimeout, "no answer to a probe while another connection claimed this instance"
	}
	c.closeWith(code, message)
}

// yielded reports whether a newcomer elsewhere was ever granted the
// takeover of this connection.
func (ch *challenge) yielded() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return !ch.granted.IsZero()
}
