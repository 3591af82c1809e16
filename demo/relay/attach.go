package relay

import (
	"time"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// attachment is the relay's node-local record of one attachment id: which
// socket holds it, or the grace timer running while none does.
type attachment struct {
	key   route
	sock  *browserConn
	grace *time.Timer
	left  time.Time // when its socket dropped; zero while one holds it, or before any has
	// tooLarge is the seq of the last request too large for the browser
	// leg that the runtime was answered for (firstAnswer): a replay of it
	// gets the stand-in again, and no second reply.
	tooLarge uint64
}

// firstAnswer reports whether the runtime is still owed its reply to
// the request at seq on instance's attachment session, too large for the
// browser leg, and notes it answered: a resume replays the request, and
// a request gets exactly one reply (spec 000). An unsequenced request is
// never replayed; nor is one whose attachment this node no longer knows
// (it is answered, as there is no telling).
func (r *Relay) firstAnswer(instance, session string, seq uint64) bool {
	if seq == 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attachments[route{instance, session}]
	if a == nil {
		return true
	}
	if seq <= a.tooLarge {
		return false
	}
	a.tooLarge = seq
	return true
}

// attach grants s an attachment id for instance: wanted back when it was
// issued to this credential and instance and has not ended, a fresh one
// otherwise. welcome is queued on s, and s's queue held, until the route is
// installed: no routed frame can overtake the welcome, and a client that
// has its welcome can be routed to. A live socket holding the id is
// superseded.
// It returns the error code of a refusal, or "".
func (r *Relay) attach(s *browserConn, instance, wanted string, welcome func(id string) bool) string {
	s.q.hold()
	defer s.q.unhold()
	r.mu.Lock()
	id, a, code := r.claimLocked(s.cred, instance, wanted)
	yielded := r.yielded
	r.yielded = ""
	if yielded != "" {
		// Before the welcome can be seen: the runtime drops the yielded
		// session before any frame of the newcomer's reaches it.
		defer r.detachYielded(instance, yielded)
	}
	if code != "" {
		r.mu.Unlock()
		return code
	}
	if !welcome(id) {
		r.dropUnheldLocked(a)
		r.mu.Unlock()
		return relayleg.CodeShuttingDown
	}
	prev := a.sock
	a.sock, a.left = s, time.Time{}
	s.instance, s.id = instance, id
	if a.grace != nil {
		a.grace.Stop()
		a.grace = nil
	}
	r.table.SetAttachment(instance, id, s)
	r.mu.Unlock()
	if prev != nil {
		prev.closeWith(relayleg.CodeSuperseded, "another socket reclaimed this attachment", false)
	}
	return ""
}

// claimLocked finds or creates the attachment record for a hello.
func (r *Relay) claimLocked(cred credHash, instance, wanted string) (string, *attachment, string) {
	if wanted != "" && !r.ended.has(wanted) && r.ids.verify(wanted, cred, instance) {
		if a, ok := r.attachments[route{instance, wanted}]; ok {
			return wanted, a, ""
		}
		// Issued before a restart, or by another node sharing the key.
		return r.newAttachmentLocked(instance, wanted)
	}
	return r.newAttachmentLocked(instance, r.ids.mint(cred, instance))
}

func (r *Relay) newAttachmentLocked(instance, id string) (string, *attachment, string) {
	if r.perInstance[instance] >= r.cfg.Limits.AttachmentsPerInstance && !r.yieldLocked(instance) {
		return "", nil, relayleg.CodeTooManyAttachments
	}
	a := &attachment{key: route{instance, id}}
	r.attachments[a.key] = a
	r.perInstance[instance]++
	return id, a, ""
}

// yieldLocked makes room for a live newcomer at the per-instance limit: the
// id of instance whose socket dropped longest ago ends, as its grace would
// have ended it (r.yielded names it, for attach to send acp.detach). Ids
// held by live sockets never yield, so a credential shared by many cannot
// be used to push a live attachment out, and ids nobody holds cannot lock
// everyone out (4430) for a whole grace period. It reports false when every
// id is held.
func (r *Relay) yieldLocked(instance string) bool {
	var oldest *attachment
	for k, a := range r.attachments {
		if k.instance == instance && a.sock == nil && (oldest == nil || a.left.Before(oldest.left)) {
			oldest = a
		}
	}
	if oldest == nil {
		return false
	}
	if oldest.grace != nil {
		oldest.grace.Stop()
	}
	r.endLocked(oldest)
	r.yielded = oldest.key.session
	r.log.Info("attachment yielded to a newcomer at the instance's limit", "instance", instance, "attachment", digest(oldest.key.session))
	return true
}

// detachYielded tells the runtime that a yielded id's session is over,
// unless the id moved to another node: that node ends it (as expire leaves
// it to), and a detach from here would end the session resumed there.
func (r *Relay) detachYielded(instance, session string) {
	if movedAway(r.table, route{instance, session}) {
		return
	}
	if rt := r.table.Runtime(instance); rt != nil {
		rt.Send(detachFrame(instance, session))
	}
}

// release is called when s is done. If s still holds its attachment, the
// route is removed and either the id ends now (explicit detach, already
// forwarded) or its grace period starts.
func (r *Relay) release(s *browserConn, detached bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attachments[route{s.instance, s.id}]
	if a == nil || a.sock != s {
		return // superseded, or never attached
	}
	r.table.RemoveAttachment(s.instance, s.id, s)
	a.sock, a.left = nil, time.Now()
	if detached {
		r.endLocked(a)
		return
	}
	if r.closed {
		return
	}
	a.grace = time.AfterFunc(r.cfg.Limits.Grace, func() { r.expire(a) })
}

// knocked restarts the grace period of the attachment id a hello named, when
// the hello was refused unknown_instance: its client is still there, and
// redials only because the instance has no runtime. Without this an
// attachment whose runtime was away for longer than the grace (a network
// outage, a laptop asleep) ended although its page kept knocking the whole
// time, and the runtime, told acp.detach as soon as it was back, dropped the
// session's agent and retention. The id must verify for the hello's
// credential and instance, and its record must be in its grace here: a
// knock creates no record, so the records in grace stay bounded by
// AttachmentsPerInstance per instance (and yield to live newcomers at that
// limit, as ever). A knock after the grace has run out changes nothing.
// On NATS the record is the node's where the socket dropped, so the knock
// is told to every node (Knocker).
func (r *Relay) knocked(cred credHash, instance, id string) {
	if id == "" || !r.ids.verify(id, cred, instance) {
		return
	}
	r.restartGrace(instance, id)
	if k, ok := r.table.(Knocker); ok {
		k.Knock(instance, id)
	}
}

// restartGrace restarts the grace period of instance's attachment id if it
// is in its grace here.
func (r *Relay) restartGrace(instance, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attachments[route{instance, id}]
	if a == nil || a.sock != nil || a.grace == nil || r.closed || !a.grace.Stop() {
		return // held, not known here, or its grace has already run out
	}
	a.grace = time.AfterFunc(r.cfg.Limits.Grace, func() { r.expire(a) })
}

// expire ends an attachment whose grace ran out and tells the runtime, which
// then drops the session's agent and retention.
func (r *Relay) expire(a *attachment) {
	r.mu.Lock()
	if r.attachments[a.key] != a || a.sock != nil || r.closed {
		r.mu.Unlock()
		return
	}
	r.endLocked(a)
	if movedAway(r.table, a.key) {
		r.mu.Unlock() // its new node ends it; a detach from here would end the session it resumed there
		return
	}
	rt := r.table.Runtime(a.key.instance)
	if rt == nil && len(r.owed[a.key.instance]) < r.cfg.Limits.AttachmentsPerInstance {
		r.owed[a.key.instance] = append(r.owed[a.key.instance], a.key.session)
	}
	r.mu.Unlock()
	r.log.Info("attachment grace expired", "instance", a.key.instance, "attachment", digest(a.key.session), "runtime_connected", rt != nil)
	if rt != nil {
		rt.Send(detachFrame(a.key.instance, a.key.session))
	}
}

// reclaimable reports whether an attachment id of instance is held by no
// socket and still in its grace period.
func (r *Relay) reclaimable(instance, session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attachments[route{instance, session}]
	return a != nil && a.sock == nil
}

// payOwed sends a runtime that has just been reached on another node the
// detaches of the attachments whose grace ran out while it was away; a
// runtime connecting to this node gets them from its welcome.
func (r *Relay) payOwed(instance string, rt Endpoint) {
	for _, session := range r.takeOwed(instance) {
		rt.Send(detachFrame(instance, session))
	}
}

// takeOwed returns the sessions whose detaches instance's runtime is owed,
// and forgets them: they are sent once.
func (r *Relay) takeOwed(instance string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	owed := r.owed[instance]
	delete(r.owed, instance)
	return owed
}

func detachFrame(instance, session string) librelay.Frame {
	return librelay.Frame{Type: librelay.TypeACPDetach, Instance: instance, Session: session}
}

func (r *Relay) endLocked(a *attachment) {
	r.forgetLocked(a)
	r.ended.add(a.key.session)
}

// dropUnheldLocked forgets a record claimLocked made for a hello whose
// welcome could not be queued (its socket was closing): no socket ever
// held it, so no grace timer would ever end it, and it would count against
// its instance's limit for good. Its id does not end: it was never granted,
// or it is a client's own, which the client may still reclaim. A record a
// socket held keeps its socket or its grace.
func (r *Relay) dropUnheldLocked(a *attachment) {
	if a.sock == nil && a.left.IsZero() {
		r.forgetLocked(a)
	}
}

func (r *Relay) forgetLocked(a *attachment) {
	delete(r.attachments, a.key)
	if r.perInstance[a.key.instance]--; r.perInstance[a.key.instance] <= 0 {
		delete(r.perInstance, a.key.instance)
	}
}

// runtimeGone closes every socket attached to instance with runtime_gone.
// Their ids stay reclaimable: the grace period runs as for any drop, and the
// client resumes from its cursor once the runtime is back.
func (r *Relay) runtimeGone(instance string) {
	tellGone(r.socketsOf(instance), goneMessage)
}

const goneMessage = "the instance's runtime disconnected"

// removeRuntime removes rt as instance's runtime if it still is, and then
// returns the sockets attached to instance until the removal, under r.mu as
// installRuntime does: with the list taken after the lock was let go, a
// socket that attached meanwhile to a runtime that had just taken the
// instance was told its runtime was gone.
func (r *Relay) removeRuntime(instance string, rt Endpoint) (removed bool, attached []*browserConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.table.RemoveRuntime(instance, rt) {
		return false, nil
	}
	return true, r.socketsOfLocked(instance)
}

// installRuntime installs rt as instance's runtime and returns the
// endpoint it replaced, with the sockets attached to instance until then.
// Both happen under r.mu, which attach holds while it registers a socket,
// so the list is exact: a socket registered before the install may have
// sent its frames (its session.resume) to the replaced runtime and is
// listed; one registered after can have reached only rt, and is not. With
// the list taken before the install and no lock between them, a socket
// whose hello completed in between was attached against the replaced
// runtime and never told.
func (r *Relay) installRuntime(instance string, rt Endpoint) (replaced Endpoint, attached []*browserConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.table.Runtime(instance) != nil {
		attached = r.socketsOfLocked(instance)
	}
	return r.table.SetRuntime(instance, rt), attached
}

// socketsOf returns the sockets attached to instance now.
func (r *Relay) socketsOf(instance string) []*browserConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.socketsOfLocked(instance)
}

func (r *Relay) socketsOfLocked(instance string) []*browserConn {
	var socks []*browserConn
	for k, a := range r.attachments {
		if k.instance == instance && a.sock != nil {
			socks = append(socks, a.sock)
		}
	}
	return socks
}

// tellGone closes socks with relay.error runtime_gone (close 4502); their
// queued frames go first.
func tellGone(socks []*browserConn, message string) {
	for _, s := range socks {
		s.closeWith(relayleg.CodeRuntimeGone, message, true)
	}
}
