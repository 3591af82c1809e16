package relay_test

import (
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// A heartbeat from a browser whose socket has megabytes of cargo queued (a
// replay towards a phone on a slow link) is answered once the batch being
// written is out, not after the whole queue: the client counts only the ack
// as life, and one that waited for the queue to drain came after the
// client's heartbeat timeout, so the client dropped a working connection,
// redialled, and the replay began again. The browser here reads nothing
// until its heartbeat is sent — the slowest downlink there is — so the
// relay's queue holds nearly all of the cargo when the heartbeat arrives;
// the ack must come before the last of it, and the cargo stays whole and in
// order around it.
func TestHeartbeatAckOvertakesQueuedCargo(t *testing.T) {
	const frames, size = 384, 32 << 10 // 12 MiB: within the 16 MiB queue, well past the kernel's buffers
	env := relaytest.Start(t, nil)
	rt := env.Connect(t)
	b := env.AttachWith(t, "", relaytest.DialOptions{ReadBuf: 16 << 10})
	sendCargo(t, rt, b, frames, size)
	heartbeatBehind(t, rt, b)
	ackAfter := -1 // cargo frames read before the ack
	for next := uint64(1); next <= frames; {
		f, err := b.Read()
		switch {
		case err != nil:
			t.Fatalf("after seq %d (ack after %d): %v (close %d)", next-1, ackAfter, err, relaytest.CloseCode(err))
		case f.Type == librelay.TypeAck && f.ReplyTo == "hb":
			ackAfter = int(next - 1)
		case f.Type == librelay.TypeACPMessage:
			if f.Seq != next {
				t.Fatalf("cargo seq %d, want %d", f.Seq, next)
			}
			next++
		case f.Type == librelay.TypeHeartbeat && f.IsRequest():
			b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		default:
			t.Fatalf("unexpected %s re %q: %.200s", f.Type, f.ReplyTo, f.Payload)
		}
	}
	if ackAfter < 0 {
		t.Fatalf("the ack waited behind all %d queued frames", frames)
	}
	t.Logf("the ack came after %d of %d queued frames", ackAfter, frames)
}

// While a session.resume from the browser is unanswered, the ack of its
// heartbeat keeps its place behind the cargo queued before it: the client
// takes that ack for the end of its wait for the resume's answer, and an
// ack that overtook a session.resumed still queued had it tell a loss that
// was none (not_resumed) and drop the answer that came after. Once the
// answer is written, acks go ahead of queued cargo again.
func TestHeartbeatAckBehindAnOpenResumesAnswer(t *testing.T) {
	const frames, size = 384, 32 << 10
	env := relaytest.Start(t, nil)
	rt := env.Connect(t)
	b := env.AttachWith(t, "", relaytest.DialOptions{ReadBuf: 16 << 10})
	if err := b.Send(librelay.Frame{Type: librelay.TypeResume, ID: "r1", Instance: b.Instance, Session: b.Session, Payload: []byte(`{"after_seq":0}`)}); err != nil {
		t.Fatal(err)
	}
	if f, err := rt.ReadCargo(); err != nil || f.Type != librelay.TypeResume || f.ID != "r1" {
		t.Fatalf("runtime got %s %q, %v; want the resume", f.Type, f.ID, err)
	}
	sendCargo(t, rt, b, frames, size)
	answer := librelay.Frame{Type: librelay.TypeResumed, ReplyTo: "r1", Instance: b.Instance, Session: b.Session, Payload: []byte(`{"from_seq":1}`)}
	if err := rt.Send(answer); err != nil {
		t.Fatal(err)
	}
	heartbeatBehind(t, rt, b)
	answeredAt, ackAt := -1, -1
	for i := 0; answeredAt < 0 || ackAt < 0; i++ {
		f, err := b.Read()
		switch {
		case err != nil:
			t.Fatalf("frame %d: %v (close %d)", i, err, relaytest.CloseCode(err))
		case f.Type == librelay.TypeAck && f.ReplyTo == "hb":
			ackAt = i
		case f.Type == librelay.TypeResumed:
			answeredAt = i
		case f.Type == librelay.TypeHeartbeat && f.IsRequest():
			b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
	}
	if ackAt < answeredAt {
		t.Fatalf("the ack (frame %d) overtook the resume's answer (frame %d)", ackAt, answeredAt)
	}
}

// sendCargo has the runtime send frames acp.messages of size bytes to b,
// seqs from 1.
func sendCargo(t *testing.T, rt *relaytest.Runtime, b *relaytest.Browser, frames, size int) {
	t.Helper()
	payload := []byte(`"` + strings.Repeat("x", size) + `"`)
	for seq := uint64(1); seq <= uint64(frames); seq++ {
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Seq: seq, Payload: payload}
		if err := rt.Send(f); err != nil {
			t.Fatalf("runtime send %d: %v", seq, err)
		}
	}
}

// heartbeatBehind has b send heartbeat "hb" once everything the runtime
// sent is in b's queue: the runtime leg is read in order, so once the
// runtime's own heartbeat is answered, every frame before it has been
// queued.
func heartbeatBehind(t *testing.T, rt *relaytest.Runtime, b *relaytest.Browser) {
	t.Helper()
	if err := rt.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "sync"}); err != nil {
		t.Fatal(err)
	}
	if f, err := rt.ReadCargo(); err != nil || f.Type != librelay.TypeAck || f.ReplyTo != "sync" {
		t.Fatalf("runtime's ack: %s re %q, %v", f.Type, f.ReplyTo, err)
	}
	if err := b.Send(librelay.Frame{Type: librelay.TypeHeartbeat, ID: "hb"}); err != nil {
		t.Fatal(err)
	}
}
