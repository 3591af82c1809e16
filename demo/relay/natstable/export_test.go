package natstable

import "github.com/relaywasm/relaywasm/librelay"

// DataMessage is a data message as node would publish it: what a node on
// the bus could send, for tests that play one.
func DataMessage(node, stream, n uint64, f *librelay.Frame) []byte {
	return appendFrame(appendHeader(nil, header{node, stream, n}), f)
}

// AttachmentSubject is the subject of an attachment's frames under the
// default prefix.
func AttachmentSubject(instance, session string) string {
	return subjects{prefix: "relay"}.attachment(instance, session)
}
