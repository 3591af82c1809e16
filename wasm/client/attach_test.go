//go:build !js

package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// recorder wraps the real transport and keeps every frame the client writes.
type recorder struct {
	client.Transport
	mu     sync.Mutex
	frames []librelay.Frame
}

func (r *recorder) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	c, err := r.Transport.Dial(ctx, url, protocols)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, r: r}, nil
}

type recordingConn struct {
	client.Conn
	r *recorder
}

func (c *recordingConn) Write(ctx context.Context, msg []byte) error {
	if f, err := librelay.ParseFrame(msg); err == nil {
		c.r.mu.Lock()
		c.r.frames = append(c.r.frames, f)
		c.r.mu.Unlock()
	}
	return c.Conn.Write(ctx, msg)
}

func (r *recorder) ofType(typ string) []librelay.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []librelay.Frame
	for _, f := range r.frames {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

// Every dial sends a hello with a fresh nonce that asks for the stored
// attachment id back, and a fresh attach with nothing stored starts at 0.
func TestHelloReclaimsWithFreshNonce(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	rec := &recorder{Transport: client.DefaultTransport}
	o := s.options(client.NewMemoryStore(), c)
	o.Transport = rec
	a := s.attach(o)
	first := a.Session()
	if first == "" || a.Cursor() != 0 {
		t.Fatalf("fresh attach: session %q cursor %d", first, a.Cursor())
	}
	startChat(t, c, a)

	s.front.Cut()
	c.Wait(t, "a second welcome", func(c *clienttest.Collector) bool { return countState(c, client.Open) >= 2 })

	hellos := rec.ofType(librelay.TypeHello)
	if len(hellos) != 2 {
		t.Fatalf("%d hellos, want 2", len(hellos))
	}
	var h0, h1 librelay.Hello
	if err := h0.UnmarshalJSON(hellos[0].Payload); err != nil {
		t.Fatal(err)
	}
	if err := h1.UnmarshalJSON(hellos[1].Payload); err != nil {
		t.Fatal(err)
	}
	switch {
	case !hellos[0].IsRequest() || hellos[0].Instance != s.env.Instance || h0.Instance != s.env.Instance:
		t.Fatalf("first hello %+v", hellos[0])
	case hellos[0].Session != "":
		t.Fatalf("fresh attach asked for attachment id %q", hellos[0].Session)
	case hellos[1].Session != first:
		t.Fatalf("redial asked for %q, want the granted %q", hellos[1].Session, first)
	case len(h0.Nonce) != librelay.NonceSize || bytes.Equal(h0.Nonce, h1.Nonce):
		t.Fatalf("nonces %x and %x: want fresh %d-byte nonces", h0.Nonce, h1.Nonce, librelay.NonceSize)
	case a.Session() != first:
		t.Fatalf("redial got attachment id %q, want %q back", a.Session(), first)
	}
	relaytest.WaitFor(t, "the redial's resume", func() bool { return len(rec.ofType(librelay.TypeResume)) == 2 })
	resumes := rec.ofType(librelay.TypeResume)
	var r librelay.Resume
	if err := r.UnmarshalJSON(resumes[len(resumes)-1].Payload); err != nil || r.AfterSeq != a.Cursor() || r.AfterSeq == 0 {
		t.Fatalf("redial resumed after %d (err %v), cursor %d", r.AfterSeq, err, a.Cursor())
	}
}

func countState(c *clienttest.Collector, s client.State) int {
	n := 0
	for _, st := range c.States {
		if st.State == s {
			n++
		}
	}
	return n
}

// A refusal no redial can cure ends Attach at once with its stable code,
// after exactly one dial.
func TestFatalRefusals(t *testing.T) {
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	cases := []struct {
		name string
		edit func(o *client.Options)
		want *client.Error
		code string
	}{
		{"bad relay key", func(o *client.Options) { o.RelayKey = otherKey.Public().(ed25519.PublicKey) }, client.ErrBadRelaySignature, "bad_relay_signature"},
		{"bad credential", func(o *client.Options) {
			o.Credential = func(context.Context) (string, error) { return "not-the-token", nil }
		}, client.ErrUnauthorized, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, nil, nil)
			o := s.options(client.NewMemoryStore(), clienttest.NewCollector())
			tc.edit(&o)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			a, err := client.Attach(ctx, o)
			if a != nil || !errors.Is(err, tc.want) || client.Code(err) != tc.code {
				t.Fatalf("Attach = %v, %v (code %q); want %v", a, err, client.Code(err), tc.want)
			}
			if n := s.front.Accepted(); n != 1 {
				t.Fatalf("%d dials, want exactly 1", n)
			}
		})
	}
}

// A Credential that fails with ErrSuperseded ends the attachment with it,
// code and all, and nothing is dialled: relay.js fails it so when another
// tab took the page's stream while the page was in the back/forward cache,
// and a redial would reclaim the attachment id from that tab. A send
// waiting for the redial fails with it too.
func TestCredentialSupersededEndsWithoutDialling(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	var taken atomic.Bool
	o.Credential = func(context.Context) (string, error) {
		if taken.Load() {
			return "", client.ErrSuperseded
		}
		return s.env.ClientToken, nil
	}
	// Only the Probe below redials: a backoff's first wait is anywhere in
	// [0, Initial), and a redial before the send queued would end the
	// attachment first (seen once under load, with Initial a second).
	o.Backoff = client.Backoff{Initial: time.Hour, Max: time.Hour}
	a := s.attach(o)
	startChat(t, c, a)

	taken.Store(true)
	s.front.Cut()
	c.Wait(t, "reconnecting", func(c *clienttest.Collector) bool { return c.States[len(c.States)-1].State == client.Reconnecting })
	sent := make(chan error, 1)
	go func() {
		sent <- a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{}}`))
	}()
	relaytest.WaitFor(t, "the send to queue", func() bool { return a.Queued() == 1 })
	a.Probe() // redial now
	select {
	case <-a.Done():
	case <-time.After(guard):
		t.Fatal("the attachment did not end")
	}
	if err := a.Err(); !errors.Is(err, client.ErrSuperseded) || client.Code(err) != "superseded" {
		t.Fatalf("the attachment ended with %v (code %q), want superseded", err, client.Code(err))
	}
	if err := <-sent; !errors.Is(err, client.ErrSuperseded) {
		t.Fatalf("the queued send failed with %v, want superseded", err)
	}
	c.Wait(t, "closed, superseded", func(c *clienttest.Collector) bool {
		last := c.States[len(c.States)-1]
		return last.State == client.Closed && client.Code(last.Err) == "superseded"
	})
	if n := s.front.Accepted(); n != 1 {
		t.Fatalf("%d dials, want only the first", n)
	}
}

// Abandon ends a live attachment with the cause given, as Close would end
// it otherwise: the state keeps the cursor, the relay holds the attachment
// id (a later attach resumes it), and Err, the last state change and a
// queued send report the cause. jsbridge abandons a page's attachment with
// ErrSuperseded when another tab took the page's slot while it was away.
func TestAbandonEndsWithItsCause(t *testing.T) {
	s := newStack(t, nil, nil)
	store := client.NewMemoryStore()
	c := clienttest.NewCollector()
	o := s.options(store, c)
	a := s.attach(o)
	startChat(t, c, a)
	session := a.Session()

	cause := fmt.Errorf("another tab took it: %w", client.ErrSuperseded)
	a.Abandon(cause)
	if err := a.Err(); err != cause || client.Code(err) != "superseded" {
		t.Fatalf("abandoned, the attachment ended with %v (code %q), want %v", err, client.Code(err), cause)
	}
	c.Wait(t, "closed, with the cause", func(c *clienttest.Collector) bool {
		last := c.States[len(c.States)-1]
		return last.State == client.Closed && last.Err == cause
	})
	if err := a.SendACP(context.Background(), []byte(`{"jsonrpc":"2.0","method":"x"}`)); err != cause {
		t.Fatalf("a send after the end failed with %v, want the cause", err)
	}
	a.Abandon(client.ErrUnauthorized) // ended already: the first reason stays
	if a.Err() != cause {
		t.Fatalf("abandoned again, Err is %v, want the first cause", a.Err())
	}
	// The cursor as the attachment ended (a frame may follow session/new's answer).
	if saved, _ := store.Load(context.Background(), a.Key()); saved.Session != session || saved.Cursor != a.Cursor() || saved.Cursor == 0 {
		t.Fatalf("the store kept %+v, want session %q at cursor %d", saved, session, a.Cursor())
	}
	b := s.attach(o)
	if b.Session() != session {
		t.Fatalf("attached again on %q, want the abandoned %q, which the relay holds", b.Session(), session)
	}

	// A cause that is not an end of its own ends the attachment as closed.
	b.Abandon(errors.New("the page is going"))
	if err := b.Err(); !errors.Is(err, client.ErrClosed) || client.Code(err) != "closed" || !strings.Contains(err.Error(), "the page is going") {
		t.Fatalf("abandoned for a plain error, the attachment ended with %v (code %q), want closed, saying why", err, client.Code(err))
	}
}

// A relay that selects a version lower than the client speaks is refused,
// and not redialled. The dev relay always selects min(peer, self), so this
// peer is a minimal relay of the test's own that answers with version 0.
func TestRefusesLowerVersion(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	var dials atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{relayleg.Subprotocol}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		_, msg, err := ws.Read(r.Context())
		if err != nil {
			return
		}
		hello, _ := librelay.ParseFrame(msg)
		var h librelay.Hello
		h.UnmarshalJSON(hello.Payload)
		sig, _ := librelay.SignWelcome(priv, h.Nonce, 0, hello.Instance)
		payload, _ := librelay.Welcome{ProtocolVersion: 0, Signature: sig}.MarshalJSON()
		out, _ := librelay.AppendFrame(nil, &librelay.Frame{Type: librelay.TypeWelcome, ReplyTo: hello.ID, Instance: hello.Instance, Session: "a1", Payload: payload})
		ws.Write(r.Context(), websocket.MessageText, out)
		ws.Read(r.Context()) // until the client hangs up
	}))
	defer srv.Close()
	o := client.Options{
		URL: "ws" + strings.TrimPrefix(srv.URL, "http"), Instance: "i",
		Credential: func(context.Context) (string, error) { return "t", nil },
		RelayKey:   pub,
		OnMessage:  func(client.Message) error { return nil },
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_, err := client.Attach(ctx, o)
	if !errors.Is(err, client.ErrUnsupportedVersion) || client.Code(err) != "unsupported_version" {
		t.Fatalf("Attach: %v, want ErrUnsupportedVersion", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
}

// Options that cannot work are refused before anything is dialled.
func TestBadOptions(t *testing.T) {
	ok := client.Options{
		URL: "ws://127.0.0.1:1/v1/attach", Instance: "i",
		Credential: func(context.Context) (string, error) { return "t", nil },
		OnMessage:  func(client.Message) error { return nil },
	}
	for name, edit := range map[string]func(*client.Options){
		"no url":        func(o *client.Options) { o.URL = "" },
		"no instance":   func(o *client.Options) { o.Instance = "" },
		"no credential": func(o *client.Options) { o.Credential = nil },
		"no handler":    func(o *client.Options) { o.OnMessage = nil },
		"short key":     func(o *client.Options) { o.RelayKey = make(ed25519.PublicKey, 5) },
	} {
		o := ok
		edit(&o)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.Attach(ctx, o)
		cancel()
		if !errors.Is(err, client.ErrBadOptions) {
			t.Errorf("%s: %v, want ErrBadOptions", name, err)
		}
	}
}

// A dial that hangs is held for HandshakeTimeout and no longer: the client
// gives up on it with ErrUnreachable for context.DeadlineExceeded, and
// dials again. Two ways to hang: a relay that accepts the TCP connection and
// then says nothing, and a Credential function that waits on its ctx (and
// returns ctx.Err(), context.Canceled, as most code does).
func TestHandshakeTimeoutBoundsADial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close() // silent until the test ends
		}
	}()
	token := func(context.Context) (string, error) { return "token", nil }
	waits := func(ctx context.Context) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}
	t.Run("silent relay", func(t *testing.T) {
		before := accepted.Load()
		dialsTimeOut(t, "ws://"+ln.Addr().String()+"/v1/attach", token)
		if n := accepted.Load() - before; n < 2 {
			t.Fatalf("the relay accepted %d connections, want a new dial after each timeout", n)
		}
	})
	t.Run("credential waits", func(t *testing.T) {
		dialsTimeOut(t, "ws://"+ln.Addr().String()+"/v1/attach", waits)
	})
}

// dialsTimeOut attaches to url and waits for two dials to end timed out.
func dialsTimeOut(t *testing.T, url string, credential func(context.Context) (string, error)) {
	t.Helper()
	changes := make(chan client.StateChange, 64)
	o := client.Options{
		URL: url, Instance: "demo", Name: "test",
		Credential:       credential,
		Store:            client.NewMemoryStore(),
		OnMessage:        func(client.Message) error { return nil },
		OnState:          func(c client.StateChange) { changes <- c },
		HandshakeTimeout: 100 * time.Millisecond,
		Backoff:          client.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond},
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	go func() {
		if a, err := client.Attach(ctx, o); err == nil {
			a.Close()
		}
	}()
	for failed := 0; failed < 2; {
		select {
		case c := <-changes:
			if c.Err == nil {
				continue
			}
			if !errors.Is(c.Err, client.ErrUnreachable) || !errors.Is(c.Err, context.DeadlineExceeded) {
				t.Fatalf("a hung dial ended with %v, want ErrUnreachable for context.DeadlineExceeded", c.Err)
			}
			failed++
		case <-ctx.Done():
			t.Fatal("a hung dial was never given up on")
		}
	}
}

// loadGate is a Store whose Load waits for the transport to have opened a
// socket and then for after, or fails with err once the socket is open.
type loadGate struct {
	client.Store
	opened chan struct{} // closed by gatedTransport's first Dial
	after  time.Duration
	err    error
}

func (g *loadGate) Load(ctx context.Context, k client.Key) (client.Saved, error) {
	select {
	case <-g.opened:
	case <-time.After(5 * time.Second):
		return client.Saved{}, errors.New("Load waited 5 s and no socket was opened: the dial waits for the Store")
	case <-ctx.Done():
		return client.Saved{}, ctx.Err()
	}
	time.Sleep(g.after)
	if g.err != nil {
		return client.Saved{}, g.err
	}
	return g.Store.Load(ctx, k)
}

// gatedTransport dials for real, says when the first socket is open, and
// says when a socket is closed.
type gatedTransport struct {
	opened, closed chan struct{}
	once           sync.Once
	dials          atomic.Int32
}

func (g *gatedTransport) Dial(ctx context.Context, url string, protocols []string) (client.Conn, error) {
	g.dials.Add(1)
	c, err := client.DefaultTransport.Dial(ctx, url, protocols)
	if err == nil {
		g.once.Do(func() { close(g.opened) })
		c = &closeNotingConn{Conn: c, closed: g.closed}
	}
	return c, err
}

type closeNotingConn struct {
	client.Conn
	closed chan struct{}
}

func (c *closeNotingConn) Close(code int, reason string) error {
	select {
	case c.closed <- struct{}{}:
	default:
	}
	return c.Conn.Close(code, reason)
}

// The first dial does not wait for the Store: Attach dials while the stream's
// state loads (on a reloaded page, the socket's open and an IndexedDB read
// overlap). The Store here loads only once a socket is open, so an Attach
// that loaded first would never get one.
func TestDialsWhileTheStoreLoads(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	tr := &gatedTransport{opened: make(chan struct{}), closed: make(chan struct{}, 1)}
	o := s.options(&loadGate{Store: client.NewMemoryStore(), opened: tr.opened}, c)
	o.Transport = tr
	a := s.attach(o)
	startChat(t, c, a)
}

// A Store that fails leaves no socket behind: the one dialed meanwhile is
// closed, and Attach says what the Store said.
func TestStoreFailureClosesTheEarlyDial(t *testing.T) {
	s := newStack(t, nil, nil)
	broken := errors.New("the store is broken")
	tr := &gatedTransport{opened: make(chan struct{}), closed: make(chan struct{}, 1)}
	o := s.options(&loadGate{Store: client.NewMemoryStore(), opened: tr.opened, err: broken}, clienttest.NewCollector())
	o.Transport = tr
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := client.Attach(ctx, o); !errors.Is(err, broken) {
		t.Fatalf("Attach: %v, want the Store's error", err)
	}
	select {
	case <-tr.closed:
	case <-time.After(guard):
		t.Fatal("the socket dialed while the Store loaded was never closed")
	}
}

// A Store slower than the relay's wait for a hello costs the socket dialed
// beside it, not the attach: the relay closes that socket, and the client
// redials as after any transient failure.
func TestStoreSlowerThanTheHelloWait(t *testing.T) {
	t.Parallel()
	s := newStack(t, func(c *relay.Config) { c.Limits.HelloTimeout = 100 * time.Millisecond }, nil)
	c := clienttest.NewCollector()
	tr := &gatedTransport{opened: make(chan struct{}), closed: make(chan struct{}, 1)}
	// Ten hello waits between the socket's open and the hello: the relay has
	// closed the socket by then, however loaded the machine.
	o := s.options(&loadGate{Store: client.NewMemoryStore(), opened: tr.opened, after: time.Second}, c)
	o.Transport = tr
	a := s.attach(o)
	if n := tr.dials.Load(); n < 2 {
		t.Fatalf("%d dials: the relay was to close the socket dialed beside the slow Store, and the client to dial again", n)
	}
	startChat(t, c, a)
}

// A dial under way gives up when the attachment is closed: an attach
// canceled while its token function has not answered (a React unmount
// during a slow token fetch) returns at once, not at HandshakeTimeout, and
// so does Close during a redial's. Until then the stream's slot stays
// taken, and another attach of it (the remount) lands on another stream.
// The handshake's limit here is longer than the test's waits, so a dial
// that waits it out fails the test.
func TestCloseEndsADialUnderWay(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	o := s.options(client.NewMemoryStore(), c)
	o.HandshakeTimeout = 10 * guard
	asked := make(chan struct{}, 8)
	var hang atomic.Bool
	hang.Store(true)
	o.Credential = func(ctx context.Context) (string, error) {
		if hang.Load() {
			asked <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		}
		return s.env.ClientToken, nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	attached := make(chan error, 1)
	go func() {
		_, err := client.Attach(ctx, o)
		attached <- err
	}()
	<-asked
	cancel()
	select {
	case err := <-attached:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the canceled attach returned %v, want context.Canceled", err)
		}
	case <-time.After(guard):
		t.Fatal("the canceled attach waited for its dial's token")
	}

	hang.Store(false)
	a := s.attach(o)
	startChat(t, c, a)
	hang.Store(true)
	s.front.Cut()
	<-asked // the redial's token, which does not come
	closed := make(chan struct{})
	go func() {
		a.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(guard):
		t.Fatal("Close waited for the redial's token")
	}
	if !errors.Is(a.Err(), client.ErrClosed) {
		t.Fatalf("the attachment ended with %v, want ErrClosed", a.Err())
	}
}
