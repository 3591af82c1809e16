package client

import "context"

// deliverer runs the application's handler on a goroutine of its own, one
// batch at a time. The runner hands it a batch and awaits the outcome while
// it goes on answering the connection, so a handler that takes a minute
// (a Promise that waits for a person, a page holding deliveries while it
// redraws) costs the cursor that minute and nothing else: heartbeats are
// answered, sends go out, Close and Detach end the attachment at once.
type deliverer struct {
	jobs    chan []Message
	results chan delivered
	cancel  context.CancelFunc
}

// delivered is the handler's outcome for one batch.
type delivered struct {
	handled int
	err     error
}

// startDeliverer starts the handler's goroutine. Its context ends with the
// attachment, so a handler still running then (and jsbridge's wait for a
// Promise) can give up; its outcome no longer counts.
func startDeliverer(fn func(context.Context, []Message) (int, error)) deliverer {
	ctx, cancel := context.WithCancel(context.Background())
	d := deliverer{jobs: make(chan []Message), results: make(chan delivered, 1), cancel: cancel}
	go func() {
		for batch := range d.jobs {
			n, err := fn(ctx, batch)
			d.results <- delivered{handled: n, err: err}
		}
	}()
	return d
}

// stop ends the goroutine once the batch it may be running returns.
func (d *deliverer) stop() {
	d.cancel()
	close(d.jobs)
}

// maxBacklog bounds the frames kept while a delivery is awaited. Past it the
// socket is not read until the handler returns: a runtime streaming faster
// than the application takes it then meets the relay's slow-consumer rule,
// instead of this client's memory growing for as long as the handler runs.
const maxBacklog = 4096

// await hands batch to the handler and waits for its outcome, serving the
// connection meanwhile: heartbeats both ways, sends, the platform's signals,
// Close and Detach. Every other frame that arrives waits in the backlog, in
// order, and Resume calls wait in later, until the handler has returned and
// the cursor moved; both are handled by catchUp. A connection that fails
// meanwhile is noted in broken and ended once the outcome is in, so what
// the handler accepted still moves the cursor. Close and Detach end the
// handler's ctx and wait for it to return (a handler waiting on a Promise
// returns at once), for the same reason.
func (r *runner) await(batch []Message) delivered {
	r.d.jobs <- batch
	l := r.l
	for {
		var frames <-chan inbound
		if l.broken == nil && len(l.backlog) < maxBacklog {
			frames = l.frames
		}
		cmds := r.a.cmds
		if r.quit != nil {
			cmds = nil
		}
		select {
		case res := <-r.d.results:
			return res
		case in := <-frames:
			r.backlogged(in)
		case c := <-cmds:
			if rc, ok := c.(*resumeCmd); ok {
				r.later = append(r.later, rc)
				continue
			}
			if err := r.command(c); err != nil {
				// Close or Detach: the socket closes now and the handler's
				// ctx ends; what it accepted until it returns still counts,
				// so a new Attachment with the same Key does not get it again.
				r.quit = err
				r.d.cancel()
				r.breakOn(err)
			}
		case <-r.a.wake:
			r.breakOn(r.wake())
		case <-l.hbEvery.C():
			r.breakOn(r.heartbeat())
		case <-l.hbDue.C():
			if !l.hbDue.overslept() {
				r.breakOn(ErrHeartbeatTimeout)
			}
		case <-l.resumeDue.C():
			r.breakOn(r.resumeOverdue())
		}
	}
}

// backlogged keeps what arrived during a delivery, answering only what keeps
// the connection alive.
func (r *runner) backlogged(in inbound) {
	l := r.l
	for i := range in.frames {
		if f := &in.frames[i]; !r.answerControl(&f.Frame) {
			l.backlog = append(l.backlog, *f)
		}
	}
	if in.err != nil {
		r.breakOn(r.readError(in.err))
	}
}

// breakOn notes the first error that ended the connection during a delivery;
// the socket is closed at once, so the relay's grace period starts now and
// not when the handler returns.
func (r *runner) breakOn(err error) {
	l := r.l
	if err == nil || l.broken != nil {
		return
	}
	l.broken = err
	l.frames = nil
	l.stopAlarms()
	code, reason := closeCodeFor(err)
	_ = l.conn.Close(code, reason)
}
