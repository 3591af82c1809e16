package relay

import (
	"strconv"
	"sync/atomic"
	"time"
)

// liveness is a peer's heartbeat state. The connection's reader only sets
// active; everything else belongs to the sweeper goroutine, so a frame costs
// one atomic store and an idle peer costs no timer of its own.
type liveness struct {
	active    atomic.Bool
	idleSince time.Time
	probed    time.Time // zero when no probe is outstanding
	probes    int
}

// peer is a connection the sweeper watches.
type peer interface {
	alive() *liveness
	// probe queues relay.heartbeat with the given request id.
	probe(id string)
	// timedOut ends the connection with heartbeat_timeout.
	timedOut()
}

// sweep runs until the relay closes, looking at every peer a few times per
// heartbeat period. Any frame from a peer counts as a sign of life; a peer
// silent for HeartbeatInterval is probed, and one still silent
// HeartbeatTimeout after the probe is let go.
func (r *Relay) sweep() {
	l := r.cfg.Limits
	t := time.NewTicker(max(min(l.HeartbeatInterval, l.HeartbeatTimeout)/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case now := <-t.C:
			for _, p := range r.snapshotPeers() {
				r.check(p, now)
			}
		}
	}
}

func (r *Relay) check(p peer, now time.Time) {
	lv := p.alive()
	if lv.active.Swap(false) || lv.idleSince.IsZero() {
		lv.idleSince, lv.probed = now, time.Time{}
		return
	}
	l := r.cfg.Limits
	switch {
	case !lv.probed.IsZero() && now.Sub(lv.probed) >= l.HeartbeatTimeout:
		p.timedOut()
	case lv.probed.IsZero() && now.Sub(lv.idleSince) >= l.HeartbeatInterval:
		lv.probed = now
		lv.probes++
		p.probe("hb-" + strconv.Itoa(lv.probes))
	}
}

func (r *Relay) snapshotPeers() []peer {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := make([]peer, 0, len(r.peers))
	for p := range r.peers {
		ps = append(ps, p)
	}
	return ps
}

func (r *Relay) addPeer(p peer) {
	r.mu.Lock()
	r.peers[p] = struct{}{}
	r.mu.Unlock()
}

func (r *Relay) removePeer(p peer) {
	r.mu.Lock()
	delete(r.peers, p)
	r.mu.Unlock()
}
