package relay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A runtime connection that takes its instance over tells runtime_gone to
// exactly the sockets that attached while the runtime it replaces was
// installed, however close to the install they attached. A socket that
// attached just before it is one whose resume may have gone to the old,
// dead connection: it used to be missed, when it attached between the
// relay listing the sockets to tell and installing the new runtime, and
// stayed attached, its client waiting for ever on a runtime that did not
// know it. A socket that attached just after the install has spoken to the
// new runtime only, and is left alone.
func TestTakeoverTellsTheSocketsOfTheReplacedRuntimeOnly(t *testing.T) {
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Limits.TakeoverWait = 100 * time.Millisecond // the incumbent never answers its probe: no need to wait long
	})
	env.Connect(t) // the incumbent, which never reads again

	steps, proceed := stepGate(t, env, "install", "installed")

	type result struct {
		rt  *relaytest.Runtime
		err error
	}
	taken := make(chan result, 1)
	go func() {
		rt, err := connect(env)
		taken <- result{rt, err}
	}()

	waitStep(t, steps, "install")
	before := env.Attach(t, "")
	proceed <- struct{}{}
	waitStep(t, steps, "installed")
	after := env.Attach(t, "")
	proceed <- struct{}{}

	var res result
	select {
	case res = <-taken:
	case <-time.After(relaytest.WaitLimit):
		t.Fatal("the new runtime never got its welcome")
	}
	if res.err != nil {
		t.Fatalf("the new runtime: %v", res.err)
	}
	t.Cleanup(func() { res.rt.Conn.Close() })
	for _, b := range []*relaytest.Browser{before, after} {
		if err := res.rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session,
			Seq: 1, Payload: []byte(`"from the new runtime"`)}); err != nil {
			t.Fatal(err)
		}
	}

	if f := readSkippingHeartbeats(t, before); !isError(f, relayleg.CodeRuntimeGone) {
		t.Fatalf("the socket attached just before the install got %s %s first, want relay.error %s",
			f.Type, f.Payload, relayleg.CodeRuntimeGone)
	}
	if _, code := before.ReadUntilClosed(); code != relayleg.CloseFor(relayleg.CodeRuntimeGone) {
		t.Fatalf("the socket attached just before the install was closed with %d, want %d", code, relayleg.CloseFor(relayleg.CodeRuntimeGone))
	}
	if f := readSkippingHeartbeats(t, after); f.Type != librelay.TypeACPMessage || string(f.Payload) != `"from the new runtime"` {
		t.Fatalf("the socket attached just after the install got %s %s first, want the new runtime's message", f.Type, f.Payload)
	}
}

// A runtime that leaves tells runtime_gone to the sockets attached to it,
// and not to one that attached, in the moment after it was removed from
// the table, to a runtime that took the instance meanwhile: the relay
// listed the sockets to tell only after letting go of the lock an attach
// registers under, and that socket, which had only ever reached the new
// runtime, was closed and had to redial for nothing.
func TestLeaveTellsTheSocketsOfTheRuntimeThatLeftOnly(t *testing.T) {
	env := relaytest.Start(t, nil)
	gone := env.Connect(t)
	before := env.Attach(t, "")
	steps, proceed := stepGate(t, env, "removed")
	gone.Conn.Close()
	waitStep(t, steps, "removed")
	rt, err := connect(env)
	if err != nil {
		t.Fatalf("the next runtime: %v", err)
	}
	t.Cleanup(func() { rt.Conn.Close() })
	after := env.Attach(t, "")
	proceed <- struct{}{}

	if err := rt.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: after.Instance, Session: after.Session,
		Seq: 1, Payload: []byte(`"from the next runtime"`)}); err != nil {
		t.Fatal(err)
	}
	if f := readSkippingHeartbeats(t, after); f.Type != librelay.TypeACPMessage || string(f.Payload) != `"from the next runtime"` {
		t.Fatalf("the socket attached to the next runtime got %s %s first, want its message", f.Type, f.Payload)
	}
	if f := readSkippingHeartbeats(t, before); !isError(f, relayleg.CodeRuntimeGone) {
		t.Fatalf("the socket attached to the runtime that left got %s %s first, want relay.error %s",
			f.Type, f.Payload, relayleg.CodeRuntimeGone)
	}
}

// stepGate has the relay's step hook stop at each of the steps named, report
// it on steps and wait for proceed; it lets every other step through.
func stepGate(t *testing.T, env *relaytest.Env, stop ...string) (steps <-chan string, proceed chan<- struct{}) {
	ch, resume, quit := make(chan string), make(chan struct{}), make(chan struct{})
	relay.SetStepHook(env.Relay, func(step string) {
		if !slices.Contains(stop, step) {
			return
		}
		select {
		case ch <- step:
			<-resume
		case <-quit:
		}
	})
	t.Cleanup(func() { close(quit); close(resume) }) // before env.Stop: a failed test leaves nothing waiting
	return ch, resume
}

// waitStep waits for the step hook to stop at the step want.
func waitStep(t *testing.T, steps <-chan string, want string) {
	t.Helper()
	select {
	case got := <-steps:
		if got != want {
			t.Fatalf("the relay stopped at %q, want %q", got, want)
		}
	case <-time.After(relaytest.WaitLimit):
		t.Fatalf("the relay never reached %q", want)
	}
}

// connect is env.Connect for a goroutine other than the test's.
func connect(env *relaytest.Env) (*relaytest.Runtime, error) {
	rt, _, err := relaytest.DialRuntimeTLS(context.Background(), env.HTTPURL, env.RuntimeToken, env.TLS)
	if err != nil {
		return nil, err
	}
	f, nonce, err := rt.Hello(env.Instance, librelay.ProtocolVersion)
	if err == nil {
		err = relaytest.CheckWelcome(f, env.Key, nonce, env.Instance)
	}
	if err != nil {
		rt.Conn.Close()
		return nil, err
	}
	return rt, nil
}

func isError(f librelay.Frame, code string) bool {
	var e librelay.Error
	return f.Type == librelay.TypeError && e.UnmarshalJSON(f.Payload) == nil && e.Code == code
}
