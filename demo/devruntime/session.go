package devruntime

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/relaywasm/relaywasm/librelay"
)

// errSessionClosed is what the agent's writes get once its session was
// dropped (acp.detach, eviction, shutdown); the ACP connection then winds down.
var errSessionClosed = errors.New("runtime: session closed")

// session is the producer side of one attachment: it stamps seq on every frame
// the agent sends, retains the newest frames, and answers session.resume.
//
// One lock covers stamp, retain and hand-off to the connection, and the
// resume answer plus its replay, so a live frame can never be stamped between
// a replayed frame and the next, nor reach the connection out of seq order.
type session struct {
	instance, id string
	noResume     bool              // Config.NoResume: no seq, no retention
	noCancel     bool              // Config.NoCancelRequest: $/cancel_request not sent
	cancelFirst  bool              // Config.CancelRequestFirst: a cancelled turn's response waits for its $/cancel_request
	out          func(line []byte) // the current connection, or nowhere while there is none
	used         atomic.Int64      // unix nanos of the last frame either way, for eviction

	// heldMu guards held: a cancelled turn's response waiting for the
	// agent's $/cancel_request (cancelFirst), sent by it or by heldTimer.
	heldMu    sync.Mutex
	held      []byte
	heldTimer *time.Timer

	mu     sync.Mutex
	last   uint64 // seq of the newest frame; 0 before the first
	kept   retention
	closed bool

	in *io.PipeWriter // the agent's input: one ACP message per line
}

// newSession starts a dev agent for the attachment. Every Write the ACP
// connection makes is one JSON message plus a newline, which becomes one
// sequenced acp.message frame.
func newSession(cfg *Config, id string, p *pause, out func([]byte), log *slog.Logger) *session {
	pr, pw := io.Pipe()
	s := &session{instance: cfg.Instance, id: id, noResume: cfg.NoResume, noCancel: cfg.NoCancelRequest, cancelFirst: cfg.CancelRequestFirst, out: out, in: pw}
	s.kept = retention{maxFrames: cfg.RetainFrames, maxBytes: cfg.RetainBytes}
	s.touch()
	agent := newDevAgent(cfg.AgentRate, p)
	agent.loadForgets = cfg.LoadForgets
	agent.refuseOverlap = cfg.RefuseOverlap
	conn := acp.NewAgentSideConnection(agent, s, pr)
	conn.SetLogger(log)
	agent.conn = conn
	go func() {
		// If the ACP connection ends on its own (a protocol error), nothing
		// reads the pipe any more; closing it keeps feed from blocking forever.
		<-conn.Done()
		pr.CloseWithError(errSessionClosed)
	}()
	return s
}

func (s *session) touch() { s.used.Store(time.Now().UnixNano()) }

// Write is the agent's output. It splits on newlines so that even a writer
// that batched two messages yields one frame per message.
func (s *session) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		line, tail, _ := bytes.Cut(rest, []byte{'\n'})
		rest = tail
		if len(bytes.TrimSpace(line)) == 0 || s.noCancel && isCancelRequest(line) {
			continue
		}
		if s.cancelFirst && isCancelledTurn(line) {
			s.hold(line)
			continue
		}
		if err := s.emit(line); err != nil {
			return 0, err
		}
		if s.cancelFirst && isCancelRequest(line) {
			s.sendHeld()
		}
	}
	return len(p), nil
}

// cancelFirstWait bounds how long a cancelled turn's response waits for
// the agent's $/cancel_request under Config.CancelRequestFirst: a turn
// cancelled with no request open sends none.
const cancelFirstWait = 200 * time.Millisecond

// hold keeps a cancelled turn's response (a copy: the caller's buffer is
// the ACP library's) until the agent's $/cancel_request has gone out, or
// cancelFirstWait.
func (s *session) hold(line []byte) {
	s.sendHeld() // one at a time: an earlier one goes first
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.held = bytes.Clone(line)
	s.heldTimer = time.AfterFunc(cancelFirstWait, s.sendHeld)
}

// sendHeld sends the response hold keeps, if any.
func (s *session) sendHeld() {
	s.heldMu.Lock()
	line := s.held
	s.held = nil
	if s.heldTimer != nil {
		s.heldTimer.Stop()
		s.heldTimer = nil
	}
	s.heldMu.Unlock()
	if line != nil {
		_ = s.emit(line) // a session closed meanwhile has nowhere to send it
	}
}

// isCancelledTurn says whether line is the response to a session/prompt
// whose turn was cancelled.
func isCancelledTurn(line []byte) bool {
	var m struct {
		Result struct {
			StopReason string `json:"stopReason"`
		} `json:"result"`
	}
	return json.Unmarshal(line, &m) == nil && m.Result.StopReason == "cancelled"
}

// isCancelRequest says whether line is a $/cancel_request notification.
func isCancelRequest(line []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(line, &m) == nil && m.Method == "$/cancel_request"
}

// emit stamps the next seq on payload, retains the frame and hands it to the
// connection, all under the session lock.
func (s *session) emit(payload []byte) error {
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSessionClosed
	}
	f := librelay.Frame{
		Type: librelay.TypeACPMessage, Instance: s.instance, Session: s.id,
		Seq: s.last + 1, Payload: payload,
	}
	if s.noResume {
		f.Seq = 0 // as contenox ships: nothing stamped, nothing kept
	}
	line, err := appendLine(nil, &f)
	if err != nil {
		return err
	}
	s.out(line)
	if !s.noResume {
		s.last++
		s.kept.add(line)
	}
	return nil
}

// feed hands one ACP message from the client to the agent. payload is owned
// by the caller's freshly read frame, so appending the newline in place is safe.
func (s *session) feed(payload []byte) {
	s.touch()
	if _, err := s.in.Write(append(payload, '\n')); err != nil {
		return // the session is closing; the message has nobody to go to
	}
}

// resume answers a session.resume request: session.resumed, then every
// retained frame after the cursor, under the lock that live frames also take.
func (s *session) resume(req librelay.Frame, after uint64) {
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || after > s.last {
		// A cursor past the newest frame belongs to an earlier life of this
		// stream (the runtime restarted), so nothing here continues it.
		s.reply(librelay.NewError(req, librelay.CodeCursorEvicted, "cursor is not in this stream"))
		return
	}
	from, evicted := after+1, false
	if oldest := s.kept.oldest(s.last); from < oldest {
		from, evicted = oldest, true
	}
	payload, _ := librelay.Resumed{FromSeq: from, Evicted: evicted}.MarshalJSON()
	s.reply(librelay.Frame{
		Type: librelay.TypeResumed, Instance: s.instance, Session: s.id,
		ReplyTo: req.ID, Payload: payload,
	})
	for _, line := range s.kept.since(from, s.last) {
		s.out(line)
	}
}

// reply sends an unsequenced frame on the session's route.
func (s *session) reply(f librelay.Frame) {
	if line, err := appendLine(nil, &f); err == nil {
		s.out(line)
	}
}

// close drops the session: the agent's input ends, its running turns are
// cancelled with the ACP connection, and later writes fail.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	s.kept = retention{}
	s.mu.Unlock()
	s.in.CloseWithError(errSessionClosed)
}

// appendLine appends f's NDJSON line (frame plus newline) to dst.
func appendLine(dst []byte, f *librelay.Frame) ([]byte, error) {
	dst, err := librelay.AppendFrame(dst, f)
	if err != nil {
		return nil, err
	}
	return append(dst, '\n'), nil
}
