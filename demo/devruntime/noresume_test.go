package devruntime

import (
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
)

// With NoResume the runtime behaves as contenox v1.0.0 ships: its frames
// carry no seq, nothing is retained, and session.resume gets no answer at
// all (neither session.resumed nor relay.error), for a session it holds and
// for one it does not.
func TestNoResume(t *testing.T) {
	r := testRuntime(4)
	r.cfg.NoResume = true
	c := &conn{out: make(chan []byte, 16), done: make(chan struct{})}
	r.conn.Store(c)
	defer r.dropAll()

	rec := &recorder{}
	s := bareSession(rec, 10)
	s.noResume = true
	emitN(t, s, 3)
	for i, f := range rec.frames(t) {
		if f.Seq != 0 {
			t.Fatalf("frame %d carries seq %d", i, f.Seq)
		}
	}
	if s.last != 0 || s.kept.len() != 0 {
		t.Fatalf("a non-resuming session kept seq %d and %d frames", s.last, s.kept.len())
	}

	for _, sess := range []string{"unknown", "a"} {
		if sess == "a" {
			r.session("a", true)
		}
		req := resumeReq(0)
		req.Session = sess
		if err := r.dispatch(c, req); err != nil {
			t.Fatal(err)
		}
		// dispatch answers synchronously when it answers at all.
		if n := len(c.out); n != 0 {
			t.Fatalf("session.resume for %q was answered: %s", sess, <-c.out)
		}
	}

	// The default answers, as before.
	r.cfg.NoResume = false
	req := resumeReq(0)
	req.Session = "b"
	if err := r.dispatch(c, req); err != nil {
		t.Fatal(err)
	}
	if f := mustParse(t, <-c.out); f.Type != librelay.TypeResumed {
		t.Fatalf("a resuming runtime answered %s", f.Type)
	}
}
