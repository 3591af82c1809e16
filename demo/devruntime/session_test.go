package devruntime

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/librelay"
)

// recorder collects what a session hands to the connection, in order.
type recorder struct {
	mu    sync.Mutex
	lines [][]byte
}

func (r *recorder) out(line []byte) {
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
}

func (r *recorder) frames(t *testing.T) []librelay.Frame {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]librelay.Frame, len(r.lines))
	for i, l := range r.lines {
		f, err := librelay.ParseFrame(l)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		out[i] = f
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.lines = nil
	r.mu.Unlock()
}

// bareSession is a session without an agent, for the producer logic alone.
func bareSession(rec *recorder, maxFrames int) *session {
	_, pw := io.Pipe()
	return &session{
		instance: "i", id: "a", out: rec.out, in: pw,
		kept: retention{maxFrames: maxFrames, maxBytes: 1 << 20},
	}
}

func emitN(t *testing.T, s *session, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := s.emit([]byte(`{"n":` + strconv.Itoa(i) + `}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func resumeReq(after uint64) librelay.Frame {
	payload, _ := librelay.Resume{AfterSeq: after}.MarshalJSON()
	return librelay.Frame{Type: librelay.TypeResume, Instance: "i", Session: "a", ID: "r", Payload: payload}
}

// checkResumed checks frames are session.resumed{from, evicted} answering
// "r", followed by sequenced frames from..to.
func checkResumed(t *testing.T, frames []librelay.Frame, from uint64, evicted bool, to uint64) {
	t.Helper()
	if len(frames) == 0 || frames[0].Type != librelay.TypeResumed || frames[0].ReplyTo != "r" {
		t.Fatalf("want session.resumed re r first, got %v", frames)
	}
	var r librelay.Resumed
	if err := r.UnmarshalJSON(frames[0].Payload); err != nil || r.FromSeq != from || r.Evicted != evicted {
		t.Fatalf("resumed %s, want from %d evicted %v", frames[0].Payload, from, evicted)
	}
	if frames[0].Seq != 0 || frames[0].Session != "a" || frames[0].Instance != "i" {
		t.Fatalf("resumed must be unsequenced on the session's route: %+v", frames[0])
	}
	rest := frames[1:]
	if uint64(len(rest)) != to+1-from {
		t.Fatalf("replayed %d frames, want %d..%d", len(rest), from, to)
	}
	for i, f := range rest {
		if f.Seq != from+uint64(i) {
			t.Fatalf("replayed frame %d has seq %d, want %d", i, f.Seq, from+uint64(i))
		}
	}
}

func TestSessionSeqGapFree(t *testing.T) {
	rec := &recorder{}
	s := bareSession(rec, 100)
	emitN(t, s, 5)
	for i, f := range rec.frames(t) {
		if f.Seq != uint64(i+1) || f.Type != librelay.TypeACPMessage || f.Session != "a" || f.Instance != "i" {
			t.Fatalf("frame %d: %+v", i, f)
		}
	}
}

func TestResumeCases(t *testing.T) {
	cases := []struct {
		name      string
		keep      int
		emitted   int
		after     uint64
		from      uint64
		evicted   bool
		wantError bool
	}{
		{"new session from zero", 10, 0, 0, 1, false, false},
		{"replay after the cursor", 10, 5, 2, 3, false, false},
		{"cursor at the newest frame", 10, 5, 5, 6, false, false},
		{"cursor just before retention", 3, 10, 7, 8, false, false},
		{"cursor older than retention", 3, 10, 2, 8, true, false},
		{"zero with frames evicted", 3, 10, 0, 8, true, false},
		{"cursor past the newest frame", 10, 5, 6, 0, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			s := bareSession(rec, c.keep)
			emitN(t, s, c.emitted)
			rec.reset()
			s.resume(resumeReq(c.after), c.after)
			frames := rec.frames(t)
			if c.wantError {
				if len(frames) != 1 || frames[0].Type != librelay.TypeError || frames[0].ReplyTo != "r" {
					t.Fatalf("want one relay.error re r, got %v", frames)
				}
				var e librelay.Error
				if e.UnmarshalJSON(frames[0].Payload); e.Code != librelay.CodeCursorEvicted {
					t.Fatalf("error code %q, want cursor_evicted", e.Code)
				}
				return
			}
			checkResumed(t, frames, c.from, c.evicted, uint64(c.emitted))
		})
	}
}

// A closed session emits nothing and answers any resume with cursor_evicted.
func TestClosedSession(t *testing.T) {
	rec := &recorder{}
	s := bareSession(rec, 10)
	emitN(t, s, 2)
	s.close()
	if err := s.emit([]byte(`{}`)); err == nil {
		t.Fatal("a closed session accepted a frame")
	}
	rec.reset()
	s.resume(resumeReq(0), 0)
	if f := rec.frames(t); len(f) != 1 || f[0].Type != librelay.TypeError {
		t.Fatalf("closed session answered a resume with %v", f)
	}
}

// With NoCancelRequest the agent's $/cancel_request notifications do not go
// out, and everything else does.
func TestSessionNoCancelRequest(t *testing.T) {
	rec := &recorder{}
	s := bareSession(rec, 10)
	s.noCancel = true
	lines := `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}` + "\n"
	if _, err := s.Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
	if f := rec.frames(t); len(f) != 1 || !strings.Contains(string(f[0].Payload), "cancelled") {
		t.Fatalf("sent %v, want only the response", f)
	}
}

// With CancelRequestFirst a cancelled turn's response goes out after the
// agent's $/cancel_request written after it, and on its own once
// cancelFirstWait has passed with no cancel; other messages are not held.
func TestSessionCancelRequestFirst(t *testing.T) {
	rec := &recorder{}
	s := bareSession(rec, 10)
	s.cancelFirst = true
	const (
		cancelledTurn = `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`
		cancel        = `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}`
		chunk         = `{"jsonrpc":"2.0","method":"session/update","params":{}}`
	)
	for _, line := range []string{chunk, cancelledTurn, cancel} {
		if _, err := s.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, f := range rec.frames(t) {
		got = append(got, string(f.Payload))
	}
	if want := []string{chunk, cancel, cancelledTurn}; !slices.Equal(got, want) {
		t.Fatalf("sent %q, want %q", got, want)
	}
	rec.reset()
	if _, err := s.Write([]byte(cancelledTurn + "\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.frames(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f := rec.frames(t); len(f) != 1 || string(f[0].Payload) != cancelledTurn {
		t.Fatalf("with no cancel after it, sent %v, want the cancelled turn's response alone", f)
	}
}

// Frames emitted by many goroutines while resumes are answered: read the
// way a client reads (a session.resumed restarts the expected seq at
// from_seq), the stream must be gap-free and never reordered, and each
// writer's frames must keep their order.
func TestSessionOrderingUnderConcurrency(t *testing.T) {
	rec := &recorder{}
	s := bareSession(rec, 64)
	const writers, each = 8, 400
	var writing, resuming sync.WaitGroup
	for w := range writers {
		writing.Go(func() {
			for i := range each {
				if err := s.emit(fmt.Appendf(nil, `{"w":%d,"i":%d}`, w, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	done := make(chan struct{})
	resuming.Go(func() {
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			default:
			}
			// Resume a little behind the newest frame (some cursors in
			// retention, some evicted, some from zero), while writers write.
			s.mu.Lock()
			last := s.last
			s.mu.Unlock()
			after := last - min(last, uint64(k%80))
			s.resume(resumeReq(after), after)
		}
	})
	writing.Wait()
	close(done)
	resuming.Wait()
	checkClientView(t, rec.frames(t), writers*each)
}

// checkClientView replays frames as a client would and checks the rules.
func checkClientView(t *testing.T, frames []librelay.Frame, total int) {
	t.Helper()
	expect, live := uint64(1), uint64(0)
	lastOf := map[int]int{}
	for i, f := range frames {
		switch f.Type {
		case librelay.TypeError:
			continue // a cursor past the newest frame
		case librelay.TypeResumed:
			var r librelay.Resumed
			r.UnmarshalJSON(f.Payload)
			expect = r.FromSeq
			continue
		}
		if f.Seq != expect {
			t.Fatalf("frame %d has seq %d, want %d", i, f.Seq, expect)
		}
		expect++
		if f.Seq <= live {
			continue // a replayed frame, already checked for order when it was live
		}
		live = f.Seq
		var m struct{ W, I int }
		fmt.Sscanf(string(f.Payload), `{"w":%d,"i":%d}`, &m.W, &m.I)
		if prev, ok := lastOf[m.W]; ok && m.I != prev+1 {
			t.Fatalf("writer %d: frame %d after %d", m.W, m.I, prev)
		}
		lastOf[m.W] = m.I
	}
	if live != uint64(total) {
		t.Fatalf("saw %d live frames, want %d", live, total)
	}
}

// The runtime answers a resume for a session it holds nothing of: from
// zero it starts the stream, from anything else it is cursor_evicted.
func TestRuntimeResumeUnknownSession(t *testing.T) {
	r := testRuntime(4)
	c := &conn{out: make(chan []byte, 16), done: make(chan struct{})}
	r.conn.Store(c)
	defer r.dropAll()

	req := resumeReq(5)
	r.resume(req)
	if f := mustParse(t, <-c.out); f.Type != librelay.TypeError || f.ReplyTo != "r" {
		t.Fatalf("unknown session from 5: %+v", f)
	}
	if r.session("a", false) != nil {
		t.Fatal("a cursor_evicted resume created a session")
	}
	r.resume(resumeReq(0))
	f := mustParse(t, <-c.out)
	var res librelay.Resumed
	if res.UnmarshalJSON(f.Payload); f.Type != librelay.TypeResumed || res.FromSeq != 1 || res.Evicted {
		t.Fatalf("unknown session from 0: %s %s", f.Type, f.Payload)
	}
	if r.session("a", false) == nil {
		t.Fatal("a resume from zero did not start the session")
	}
}

func mustParse(t *testing.T, line []byte) librelay.Frame {
	t.Helper()
	f, err := librelay.ParseFrame(line)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Past MaxSessions the least recently used session is dropped.
func TestSessionEviction(t *testing.T) {
	r := testRuntime(2)
	defer r.dropAll()
	r.session("a", true).used.Store(2)
	r.session("b", true).used.Store(1)
	r.session("c", true)
	if r.session("b", false) != nil || r.session("a", false) == nil || r.session("c", false) == nil {
		t.Fatal("eviction did not drop the least recently used session")
	}
}

// acp.detach from the relay drops the session, agent and retention.
func TestDetachDropsSession(t *testing.T) {
	r := testRuntime(4)
	defer r.dropAll()
	s := r.session("a", true)
	r.dispatch(nil, librelay.Frame{Type: librelay.TypeACPDetach, Instance: "i", Session: "a"})
	if r.session("a", false) != nil {
		t.Fatal("the session outlived its detach")
	}
	if err := s.emit([]byte(`{}`)); err == nil {
		t.Fatal("a detached session's agent can still send")
	}
}

// testRuntime is a runtime with no connection, for its session logic.
func testRuntime(maxSessions int) *Runtime {
	return &Runtime{cfg: Config{Instance: "i", RetainFrames: 10, RetainBytes: 1 << 20, MaxSessions: maxSessions},
		log: slog.New(slog.DiscardHandler), sessions: map[string]*session{}, up: make(chan struct{})}
}
