package natstable

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/relaywasm/relaywasm/librelay"
)

// DataMessage is a data message as node would publish it: what a node on
// the bus could send, for tests that play one.
func DataMessage(node, stream, n uint64, f *librelay.Frame) []byte {
	return appendFrame(appendHeader(nil, header{node, stream, n}), f)
}

// TailMessage is the tail node would publish on a stream whose last frame
// took counter n-1 (stream.tail).
func TailMessage(node, stream, n uint64) []byte {
	return appendHeader(nil, header{node, stream, n})
}

// AttachmentSubject is the subject of an attachment's frames under the
// default prefix.
func AttachmentSubject(instance, session string) string {
	return subjects{prefix: "relay"}.attachment(instance, session)
}

// ClaimMessage is a claim as node would publish it on the control subject:
// it holds (instance, session)'s socket since epoch.
func ClaimMessage(node uint64, instance, session string, epoch int64) []byte {
	b, _ := json.Marshal(control{Kind: kindClaim, Node: node, Instance: instance, Session: session, Epoch: epoch})
	return b
}

// HandleControl hands t a control message as its subscription would, and
// returns once t has acted on it.
func (t *Table) HandleControl(data []byte) { t.control(&nats.Msg{Data: data}) }
