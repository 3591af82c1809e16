package natstable

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/demo/relay"
)

// Takeover probes. A runtime's hello on this node for an instance whose
// runtime another node holds waits while this node asks that node, on its
// probe subject, whether the runtime answers (relay.Prober): the holder
// probes its connection as a single relay probes a local incumbent
// (relay.Hooks.Probe) and replies. Without this, two live connectors for one
// instance on two nodes took it from each other for ever, and every swap
// ended the instance's browsers runtime_gone.
//
// No reply because nobody listens (the holder's node is gone or of an
// earlier version: NATS says so at once) is a runtime that did not answer,
// and the newcomer takes over, as before. A reply that does not come in
// time while the hold stands (its node still beats) is not: that node
// tells only the first newcomer "not alive" (relay's yield), and a loaded
// node's "not alive" to one newcomer and "alive" to the other, both late,
// had both welcomed. The newcomer is refused instance_taken and redials. A
// node that stops answering altogether is taken for gone within its Lease
// (3s by default, inside the default TakeoverWait), its hold released, and
// the newcomer takes over then.

// probeRequest asks the holder of Instance whether its runtime answers
// within Wait (milliseconds: a duration, so the nodes' clocks need not
// agree).
type probeRequest struct {
	Instance string `json:"i"`
	Wait     int64  `json:"w"`
}

// probeAlive is the reply of a holder whose runtime answered; any other
// reply is one that did not (or that holds no runtime for the instance).
const probeAlive = "alive"

// probeSlack is how long past the newcomer's deadline this node waits for
// the holder's reply: the holder probes for the whole wait and replies only
// then, so the reply needs the bus's round trip and both nodes' scheduling,
// which do not shrink with the wait. A quarter of a 1s wait (250ms, as it
// was) was outlasted under -race on two loaded cores: the holder's timer
// fired 210ms late and both newcomers' requests timed out at once.
const probeSlack = time.Second

// maxProbeWait bounds how long this node probes for another: a probe holds
// a goroutine here, and no relay waits that long for a takeover.
const maxProbeWait = time.Minute

// ProbeRuntime implements relay.Prober.
func (t *Table) ProbeRuntime(instance string, rt relay.Endpoint, deadline time.Time) bool {
	h, held := t.heldElsewhere(instance, rt)
	if !held {
		return false
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	b, err := json.Marshal(probeRequest{Instance: instance, Wait: wait.Milliseconds()})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(probeSlack))
	defer cancel()
	m, err := t.nc.RequestWithContext(ctx, t.sub.probe(h.Node), b)
	if err == nil {
		return string(m.Data) == probeAlive
	}
	if now, still := t.heldElsewhere(instance, rt); !errors.Is(err, nats.ErrNoResponders) && still && now == h {
		t.log.Info("the node holding a runtime did not reply to a probe in time; the newcomer is refused", "instance", instance, "peer", nodeToken(h.Node), "err", err)
		return true
	}
	t.log.Info("the node holding a runtime did not vouch for it; a newcomer takes it over", "instance", instance, "peer", nodeToken(h.Node), "err", err)
	return false
}

// heldElsewhere reports the hold of instance's runtime, when rt is the
// stream to it on another node and this node is on the bus.
func (t *Table) heldElsewhere(instance string, rt relay.Endpoint) (holder, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h, held := t.holders[instance]
	return h, held && h.Node != t.id && t.toRuntime[instance] == rt && rt != nil && t.connected && !t.closed
}

// answerProbe answers another node's probe of this node's runtime for an
// instance. The probe can take the whole wait, so it runs on its own
// goroutine: probes of other instances are not held behind it.
func (t *Table) answerProbe(m *nats.Msg) {
	var req probeRequest
	if json.Unmarshal(m.Data, &req) != nil || m.Reply == "" {
		return
	}
	ep := t.localRuntime(req.Instance)
	h := t.hooks.Load()
	if ep == nil || h == nil || h.Probe == nil || req.Wait <= 0 {
		m.Respond([]byte("no"))
		return
	}
	deadline := time.Now().Add(min(time.Duration(req.Wait)*time.Millisecond, maxProbeWait))
	go func() {
		if h.Probe(ep, deadline) {
			m.Respond([]byte(probeAlive))
		} else {
			m.Respond([]byte("no"))
		}
	}()
}
