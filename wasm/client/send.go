package client

import (
	"bytes"
	"sync/atomic"

	"github.com/relaywasm/relaywasm/librelay"
)

// command is what the API methods hand to the attachment's goroutine.
type command interface{}

type (
	detachCmd struct{}
	closeCmd  struct {
		cause error // why: ErrClosed for Close, Abandon's cause
	}
	resumeCmd struct {
		after uint64
		done  chan error
	}
)

// sendCmd is one SendACP call. Its frame is encoded by the caller, against
// the session known then, so the common case encodes once and the
// attachment's goroutine only writes; a session that changed meanwhile (the
// relay granted a new attachment id) gets the frame encoded again.
type sendCmd struct {
	payload []byte
	trace   string
	session string
	frame   []byte
	// The outcome goes to done (SendACP waits on it) or, for StartSendACP,
	// to notify: exactly one of the two is set.
	done   chan error
	notify func(error)
	// state moves from sendWaiting to sendTaken when the goroutine starts
	// writing, or to sendWithdrawn when the caller gives up first: exactly one
	// of the two wins, so a withdrawn message is never written.
	state atomic.Int32
}

const (
	sendWaiting int32 = iota
	sendTaken
	sendWithdrawn
)

// SendOption sets something about one SendACP call's frame.
type SendOption func(*sendCmd)

// WithTrace sets the frame's trace id (librelay.Frame.Trace): the
// correlation key of the human action the message belongs to, for logs on
// the relay and the runtime. It must be librelay.ValidTraceID; "" sends the
// frame untraced.
func WithTrace(id string) SendOption { return func(s *sendCmd) { s.trace = id } }

func newSend(a *Attachment, payload []byte, notify func(error), opts []SendOption) (*sendCmd, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil, wrap(ErrBadPayload, "empty message", nil)
	}
	s := &sendCmd{payload: payload, session: a.Session(), notify: notify}
	if notify == nil {
		s.done = make(chan error, 1)
	}
	for _, o := range opts {
		o(s)
	}
	if s.trace != "" && !librelay.ValidTraceID(s.trace) {
		return nil, wrap(ErrBadOptions, "the trace id is not a librelay trace id", nil)
	}
	if err := s.encode(&a.o); err != nil {
		return nil, err
	}
	return s, nil
}

// encode makes the message's frame for o's instance. One over
// o.MaxSendBytes is refused with ErrFrameTooLarge: the relay would discard
// it and close the connection (4413), and it would be reported sent and
// lost.
func (s *sendCmd) encode(o *Options) error {
	f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: o.Instance, Session: s.session, Trace: s.trace, Payload: s.payload}
	b, err := librelay.AppendFrame(s.frame[:0], &f)
	if err != nil {
		return wrap(ErrBadPayload, "", err) // not one JSON value, or over librelay.MaxFrameBytes
	}
	if len(b) > o.MaxSendBytes {
		return wrap(ErrFrameTooLarge, "its frame is "+uitoa(uint64(len(b)))+" bytes, the limit "+uitoa(uint64(o.MaxSendBytes)), nil)
	}
	s.frame = b
	return nil
}

// finish reports the message's outcome, once.
func (s *sendCmd) finish(err error) {
	if s.notify != nil {
		s.notify(err)
		return
	}
	s.done <- err
}

func (s *sendCmd) take() bool     { return s.state.CompareAndSwap(sendWaiting, sendTaken) }
func (s *sendCmd) withdraw() bool { return s.state.CompareAndSwap(sendWaiting, sendWithdrawn) }
func (s *sendCmd) release()       { s.state.Store(sendWaiting) }

// sendQueue holds messages waiting for a connection that has resumed,
// bounded by count and bytes so a long outage cannot grow memory without end.
type sendQueue struct {
	items    []*sendCmd
	bytes    int
	maxItems int
	maxBytes int
}

func (q *sendQueue) push(s *sendCmd) bool {
	if len(q.items) >= q.maxItems || q.bytes+len(s.frame) > q.maxBytes {
		q.prune()
	}
	if len(q.items) >= q.maxItems || q.bytes+len(s.frame) > q.maxBytes {
		return false
	}
	q.items = append(q.items, s)
	q.bytes += len(s.frame)
	return true
}

// prune drops the messages their callers withdrew, so they stop taking room.
func (q *sendQueue) prune() {
	kept := q.items[:0]
	for _, s := range q.items {
		if s.state.Load() == sendWithdrawn {
			q.bytes -= len(s.frame)
			continue
		}
		kept = append(kept, s)
	}
	clear(q.items[len(kept):])
	q.items = kept
}

// pushFront puts back a message that turned out not to have been sent; it
// was first in line, so it stays first, and it was already counted once.
func (q *sendQueue) pushFront(s *sendCmd) {
	q.items = append([]*sendCmd{s}, q.items...)
	q.bytes += len(s.frame)
}

func (q *sendQueue) pop() *sendCmd {
	if len(q.items) == 0 {
		return nil
	}
	s := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	q.bytes -= len(s.frame)
	return s
}

// fail ends every waiting message with err.
func (q *sendQueue) fail(err error) {
	for s := q.pop(); s != nil; s = q.pop() {
		if s.take() {
			s.finish(err)
		}
	}
}
