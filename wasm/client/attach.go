package client

import (
	"context"
	"sync/atomic"
)

// Attachment is one client's end of a stream through the relay: it holds the
// connection, redials it when it drops, resumes from the cursor after every
// redial, and delivers each sequenced message to the application once, in
// order. All methods are safe for concurrent use.
type Attachment struct {
	o   Options
	key Key

	cmds chan command
	done chan struct{}
	err  error // why the attachment ended; written before done is closed

	// closing ends when Close or Abandon is called, before the command
	// reaches the attachment's goroutine: a dial under way (a token
	// function that has not answered, a socket still opening) gives up at
	// once instead of holding the end, and the stream's slot, for up to
	// HandshakeTimeout.
	closing     context.Context
	stopDialing context.CancelFunc

	// Platform signals, set without blocking and read by the attachment's
	// goroutine when wake fires: the last word on the network wins.
	wake    chan struct{}
	offline atomic.Bool
	probe   atomic.Bool

	cursor    atomic.Uint64
	session   atomic.Pointer[string]
	state     atomic.Int32
	queued    atomic.Int32
	resumable atomic.Bool
}

// Attach loads the stream's saved state from the Store while it dials the
// relay, then reclaims the saved attachment id and resumes from the saved
// cursor.
//
// It returns once the relay has welcomed the client (and the welcome has
// verified against RelayKey, when one is pinned); messages may already be on
// their way to the handler by then. A refusal that no redial can cure
// (ErrUnauthorized, ErrBadRelaySignature, ErrUnsupportedVersion, or
// ErrBadOptions from a Transport that will never dial the URL) is returned
// as an error. A transient failure (the relay unreachable, the runtime not
// connected) is retried with backoff until it succeeds or ctx ends; ctx bounds
// only the attach, not the life of the Attachment.
func Attach(ctx context.Context, o Options) (*Attachment, error) {
	o.setDefaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	a := &Attachment{
		o:    o,
		key:  Key{URL: o.URL, Instance: o.Instance, Name: o.Name},
		cmds: make(chan command),
		done: make(chan struct{}),
		wake: make(chan struct{}, 1),
	}
	a.closing, a.stopDialing = context.WithCancel(context.Background())
	if o.OnStart != nil {
		o.OnStart(a)
	}
	first := startDial(a.closing, &a.o)
	saved, err := o.Store.Load(ctx, a.key)
	if err != nil {
		closeDialed(first)
		return nil, err
	}
	opened := make(chan error, 1)
	go newRunner(a, saved, opened, first).run()
	select {
	case err := <-opened:
		if err != nil {
			return nil, err
		}
		return a, nil
	case <-ctx.Done():
		a.Close()
		return nil, ctx.Err()
	}
}

// SendACP sends one ACP message (a JSON-RPC request, response or
// notification) to the runtime. It returns once the message has been written
// to the socket. While the attachment is reconnecting the message waits in a
// bounded queue and goes out after the resume; a full queue fails at once with
// ErrSendQueueFull, and a message still waiting at Detach or Close fails with
// ErrDetached or ErrClosed. A message is never sent twice: if ctx ends while
// it waits, it is withdrawn, and ctx's error returned.
//
// opts set the frame's trace id (WithTrace). payload must not be modified
// until SendACP returns.
func (a *Attachment) SendACP(ctx context.Context, payload []byte, opts ...SendOption) error {
	s, err := newSend(a, payload, nil, opts)
	if err != nil {
		return err
	}
	if err := a.command(ctx, s); err != nil {
		return err
	}
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		if s.withdraw() {
			return ctx.Err()
		}
		return <-s.done // already being written; its outcome is the answer
	}
}

// StartSendACP is SendACP for a caller that must not block, such as a
// JavaScript event handler: it returns at once, and done is called once
// with what SendACP would have returned. When the attachment's goroutine is
// waiting for work, as it nearly always is, the message is handed to it
// directly and done is called from it, right after the write; otherwise a
// goroutine of its own waits to hand it over. Either way done must not
// block. withdraw(err) takes the message back if it has not been taken for
// writing yet (done then gets err), as SendACP does when its ctx ends; once
// taken it has no effect and done gets the write's outcome.
//
// It exists for the browser: a sendACP from JavaScript otherwise costs a
// goroutine, a context and two more goroutine switches per message, which
// on the page's one thread is main-thread time.
func (a *Attachment) StartSendACP(payload []byte, done func(error), opts ...SendOption) (withdraw func(error)) {
	s, err := newSend(a, payload, done, opts)
	if err != nil {
		done(err)
		return func(error) {}
	}
	withdraw = func(err error) {
		if s.withdraw() {
			done(err)
		}
	}
	select {
	case a.cmds <- s:
		return withdraw
	case <-a.done:
		if s.take() {
			done(a.err)
		}
		return withdraw
	default:
	}
	go func() {
		select {
		case a.cmds <- s:
		case <-a.done:
			if s.take() {
				done(a.err)
			}
		}
	}()
	return withdraw
}

// Resume asks the runtime to deliver the stream again from after afterSeq.
// Attach already resumes from the saved cursor; Resume is for an application
// that lost what it had rendered and wants it again. Messages up to the
// highest seq ever delivered come again with Replay set, and are not added to
// the transcript twice. afterSeq beyond that highest seq is ErrBadCursor.
func (a *Attachment) Resume(ctx context.Context, afterSeq uint64) error {
	c := &resumeCmd{after: afterSeq, done: make(chan error, 1)}
	if err := a.command(ctx, c); err != nil {
		return err
	}
	select {
	case err := <-c.done:
		return err
	case <-a.done:
		return a.err
	}
}

// Detach ends the attachment for good: it tells the relay (acp.detach, which
// the relay forwards to the runtime at once), closes the socket normally and
// clears the Store's state for this stream, so a later Attach with the same
// name starts fresh. Messages still queued fail with ErrDetached. Detaching
// while disconnected clears the local state; the relay then ends the
// attachment id when its grace period expires.
func (a *Attachment) Detach(ctx context.Context) error {
	if err := a.command(ctx, detachCmd{}); err != nil {
		return err
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.err == ErrDetached {
		return nil
	}
	return a.err
}

// Close ends the attachment without detaching: the socket closes, the Store
// keeps the cursor, and the relay holds the attachment id for its grace
// period, so another Attachment with the same Key can resume where this one
// stopped. It is what a page being unloaded amounts to.
func (a *Attachment) Close() error {
	a.Abandon(ErrClosed)
	return nil
}

// Abandon ends the attachment as Close does, for cause: the socket closes,
// the Store keeps the cursor and the relay holds the attachment id, and
// Err and the last state change report cause. It is for an application
// that knows the stream is no longer this attachment's to hold: a page
// whose stream another tab took while the page was away abandons its
// attachment with ErrSuperseded (jsbridge), so that it neither goes on
// beside that tab nor takes the stream back from it. A cause that is not
// one of the errors that end an attachment (ErrSuperseded, ErrUnauthorized
// …; nil too) ends it as ErrClosed, wrapping cause. Abandon waits for the
// end; an attachment that had already ended keeps the reason it had.
func (a *Attachment) Abandon(cause error) {
	if !fatal(cause) {
		cause = wrap(ErrClosed, "abandoned", cause)
	}
	a.stopDialing()
	select {
	case a.cmds <- closeCmd{cause}:
	case <-a.done:
	}
	<-a.done
}

// History returns the local transcript, oldest first: the messages received
// (with their seq) and sent (Out), and the losses told (Lost), each in its
// place, as far back as Options.History reaches.
func (a *Attachment) History(ctx context.Context) ([]Entry, error) {
	h, err := a.o.Store.History(ctx, a.key)
	return PlaceLosses(h), err
}

// SetOnline tells the attachment what the platform knows about the network.
// Going offline closes the socket at once (a browser's offline emulation, like
// a phone changing networks, leaves a socket silently dead) and holds redials;
// coming back online redials immediately instead of waiting out the backoff.
func (a *Attachment) SetOnline(online bool) {
	a.offline.Store(!online)
	a.nudge()
}

// Probe checks the connection now: a heartbeat when it is open, an immediate
// redial when it is waiting to reconnect. A page calls it when it becomes
// visible again, since a sleeping tab may have lost its socket unnoticed.
// Sends made while the heartbeat waits for its answer are held until it
// comes, or go out on the next connection: a socket that died while the
// page slept may still take them (iOS keeps it open) and lose them.
func (a *Attachment) Probe() {
	a.probe.Store(true)
	a.nudge()
}

// Cursor is the seq of the last message the handler accepted.
func (a *Attachment) Cursor() uint64 { return a.cursor.Load() }

// Session is the attachment id the relay granted ("" before the first welcome).
func (a *Attachment) Session() string {
	if s := a.session.Load(); s != nil {
		return *s
	}
	return ""
}

// Resumable reports whether the runtime resumes this stream: true until a
// resume goes unanswered for Options.ResumeTimeout (a runtime that keeps no
// retention, as contenox v1.0.0 ships) or is refused (relay.error
// unsupported_type), and true again as soon as the runtime resumes one or
// sends a sequenced frame. While it is false, what arrives while the
// attachment is away is gone.
func (a *Attachment) Resumable() bool { return a.resumable.Load() }

// Queued is how many sent messages wait for the connection, for an
// application that shows them as pending.
func (a *Attachment) Queued() int { return int(a.queued.Load()) }

// State is the connection's current state.
func (a *Attachment) State() State { return State(a.state.Load()) }

// Key is the key the attachment's state is stored under.
func (a *Attachment) Key() Key { return a.key }

// Done is closed when the attachment has ended; Err then says why.
func (a *Attachment) Done() <-chan struct{} { return a.done }

// Err is nil while the attachment lives, then why it ended: ErrClosed,
// ErrDetached or a fatal error such as ErrUnauthorized.
func (a *Attachment) Err() error {
	select {
	case <-a.done:
		return a.err
	default:
		return nil
	}
}

func (a *Attachment) publish(session string, cursor uint64) {
	a.session.Store(&session)
	a.cursor.Store(cursor)
}

// command hands c to the attachment's goroutine.
func (a *Attachment) command(ctx context.Context, c command) error {
	select {
	case a.cmds <- c:
		return nil
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nudge wakes the attachment's goroutine without waiting for it: a browser
// event handler calls SetOnline and Probe, and must never block.
func (a *Attachment) nudge() {
	select {
	case a.wake <- struct{}{}:
	default: // a wake is already pending; it will read the latest flags
	}
}
