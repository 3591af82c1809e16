package natstable

import (
	"context"
	"encoding/json"
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
// No reply (the holder's node is gone or of an earlier version: NATS says
// at once that nobody listens; the bus is in trouble; the reply is late) is
// a runtime that did not answer, and the newcomer takes over, as before.

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
// the holder's reply, for the bus's round trip: the holder probes for the
// whole wait, and a runtime that answers just in time must not be taken over.
func probeSlack(wait time.Duration) time.Duration {
	return min(max(wait/4, 50*time.Millisecond), time.Second)
}

// maxProbeWait bounds how long this node probes for another: a probe holds
// a goroutine here, and no relay waits that long for a takeover.
const maxProbeWait = time.Minute

// ProbeRuntime implements relay.Prober.
func (t *Table) ProbeRuntime(instance string, rt relay.Endpoint, deadline time.Time) bool {
	t.mu.RLock()
	h, held := t.holders[instance]
	current := held && h.Node != t.id && t.toRuntime[instance] == rt && rt != nil
	connected := t.connected && !t.closed
	t.mu.RUnlock()
	if !current || !connected {
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
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(probeSlack(wait)))
	defer cancel()
	m, err := t.nc.RequestWithContext(ctx, t.sub.probe(h.Node), b)
	if err != nil {
		t.log.Info("the node holding a runtime did not vouch for it; a newcomer takes it over", "instance", instance, "peer", nodeToken(h.Node), "err", err)
		return false
	}
	return string(m.Data) == probeAlive
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
