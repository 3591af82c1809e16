// Package relaytest holds raw peers for testing a relay: a browser-leg
// client on coder/websocket and a runtime-leg peer speaking NDJSON by hand,
// both reading and writing every frame with librelay. They do exactly what
// the test tells them and nothing on their own (no heartbeat answers, no
// reconnects), so a test sees the relay's behaviour and nothing else. Start
// runs the dev relay in-process on loopback, StartTLS the same over TLS with
// a certificate the test makes (NewCert), a Proxy stands between a peer
// and the relay where a test breaks the network, and WaitFor waits for a
// change that nothing announces.
package relaytest

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// IOTimeout guards every read and write a raw peer makes, so a broken relay
// fails a test instead of hanging it. It is not an assertion about speed.
const IOTimeout = 20 * time.Second

// WaitLimit bounds every wait of a test on the stack (WaitFor, and the
// engine's tests' waits in wasm/client/clienttest), so that a broken relay
// or engine fails the test instead of hanging it. It is a deadline for
// liveness, not an assertion about speed.
const WaitLimit = 60 * time.Second

// WaitFor polls cond every 10 ms until it holds, for a change nothing
// announces (a relay's routing table, an engine's cursor); it fails t after
// WaitLimit, naming what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Env describes a relay under test.
type Env struct {
	HTTPURL      string // base URL, e.g. http://127.0.0.1:1234
	AttachURL    string // ws://…/v1/attach
	Instance     string
	ClientToken  string
	RuntimeToken string
	Key          ed25519.PublicKey
	Origin       string // an Origin the relay accepts
	// TLS is the client side's TLS config (the roots that trust the
	// relay's certificate) when the relay is served over https; nil for
	// plain HTTP. Every dial through Env uses it.
	TLS *tls.Config

	Relay  *relay.Relay     // nil for a relay in another process
	Server *httptest.Server // nil for a relay in another process
	Config relay.Config     // what Start used; zero for an external relay
}

// Start runs the dev relay on loopback for the test's lifetime. edit may
// change the config (limits, key) before the relay starts.
func Start(t testing.TB, edit func(*relay.Config)) *Env {
	t.Helper()
	return start(t, edit, nil)
}

// StartTLS is Start serving both legs over TLS (relay.Config.TLSCert and
// TLSKey) with a certificate made for the test (NewCert); env.TLS trusts it.
func StartTLS(t testing.TB, edit func(*relay.Config)) *Env {
	t.Helper()
	return start(t, edit, NewCert(t, t.TempDir()))
}

func start(t testing.TB, edit func(*relay.Config), cert *Cert) *Env {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Instance: "test", ClientToken: "client-token", RuntimeToken: "runtime-token", Origin: "http://app.example"}
	cfg := relay.Config{
		Key:                key,
		RuntimeCredentials: map[string]string{env.RuntimeToken: env.Instance, "any-runtime": relay.AnyInstance},
		ClientCredentials:  map[string]string{env.ClientToken: env.Instance, "any-client": relay.AnyInstance},
		OriginPatterns:     []string{"app.example"},
		Logger:             slog.New(slog.DiscardHandler),
	}
	if cert != nil {
		cfg.TLSCert, cfg.TLSKey = cert.CertFile, cert.KeyFile
		env.TLS = cert.ClientConfig()
	}
	if edit != nil {
		edit(&cfg)
	}
	env.serve(t, cfg, "127.0.0.1:0")
	return env
}

// serve starts a relay with cfg on addr and points env at it.
func (env *Env) serve(t testing.TB, cfg relay.Config, addr string) {
	t.Helper()
	rl, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Limits = rl.Limits()
	env.Relay, env.Config = rl, cfg
	srv := &http.Server{Handler: rl}
	rl.ConfigureServer(srv, ln.Addr().String())
	env.Server = &httptest.Server{Listener: ln, Config: srv, TLS: rl.TLSConfig()}
	if env.Server.TLS != nil {
		env.Server.StartTLS()
	} else {
		env.Server.Start()
	}
	env.HTTPURL = env.Server.URL
	env.AttachURL = "ws" + strings.TrimPrefix(env.Server.URL, "http") + relayleg.AttachPath
	env.Key = rl.PublicKey()
	t.Cleanup(env.Stop)
}

// Stop closes the in-process relay and its server.
func (env *Env) Stop() {
	if env.Relay != nil {
		env.Relay.Close()
		env.Server.Close()
	}
}

// Restart stops the in-process relay and starts a new one with the same
// config (so the same key) on the same address, as a restarted process would.
func (env *Env) Restart(t testing.TB) {
	t.Helper()
	addr := env.Server.Listener.Addr().String()
	env.Stop()
	env.serve(t, env.Config, addr)
}

// Browser is a raw browser-leg client.
type Browser struct {
	WS       *websocket.Conn
	Instance string
	Session  string // the attachment id granted by the welcome
	// AnswerHeartbeats makes ReadUntilClosed answer the relay's probes.
	AnswerHeartbeats bool
}

// DialOptions adjusts a browser dial.
type DialOptions struct {
	Origin    string   // sent as Origin; "" sends none
	Host      string   // sent as Host; "" sends the URL's
	Protocols []string // overrides the offered subprotocols
	ReadBuf   int      // when > 0, the socket's kernel receive buffer (to make a slow consumer fill fast)
	// Uplink, when > 0, paces the client's writes to this many bytes per
	// second, like a phone's slow uplink: a large message then takes a while
	// to send, as it can from a browser.
	Uplink int
	// TLS is the client TLS config for a wss URL (nil: the system roots).
	TLS *tls.Config
	// LocalIP, when set, is the address the socket is dialled from
	// (127.0.0.2 is another loopback client on Linux), for a limit per
	// client address.
	LocalIP string
}

// DialBrowser opens a browser-leg WebSocket offering the relay subprotocol
// and the credential. The *http.Response is the upgrade's, also on refusal.
func DialBrowser(ctx context.Context, attachURL, token string, o DialOptions) (*Browser, *http.Response, error) {
	protocols := o.Protocols
	if protocols == nil {
		protocols = []string{relayleg.Subprotocol, relayleg.BearerSubprotocol(token)}
	}
	h := http.Header{}
	if o.Origin != "" {
		h.Set("Origin", o.Origin)
	}
	ws, resp, err := websocket.Dial(ctx, attachURL, &websocket.DialOptions{
		Subprotocols: protocols, HTTPHeader: h, HTTPClient: httpClient(o), Host: o.Host,
	})
	if err != nil {
		return nil, resp, err
	}
	ws.SetReadLimit(-1)
	return &Browser{WS: ws}, resp, nil
}

// httpClient dials from o.LocalIP, with a fixed receive buffer and a paced
// uplink when asked (a fresh client, so the dial does not share a transport
// with other tests).
func httpClient(o DialOptions) *http.Client {
	d := &net.Dialer{}
	if o.LocalIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.LocalIP)}
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok && o.ReadBuf > 0 {
			tc.SetReadBuffer(o.ReadBuf)
		}
		if err == nil && o.Uplink > 0 {
			c = &pacedConn{Conn: c, rate: o.Uplink}
		}
		return c, err
	}, TLSClientConfig: o.TLS}
	return &http.Client{Transport: tr}
}

// pacedConn writes at rate bytes per second on average, in chunks of at
// most 1/100 of it.
type pacedConn struct {
	net.Conn
	rate int

	mu    sync.Mutex
	start time.Time
	sent  int64
}

func (c *pacedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.start.IsZero() {
		c.start = time.Now()
	}
	chunk := max(c.rate/100, 1)
	n := 0
	for n < len(p) {
		time.Sleep(time.Until(c.start.Add(time.Duration(c.sent) * time.Second / time.Duration(c.rate))))
		m, err := c.Conn.Write(p[n:min(len(p), n+chunk)])
		n += m
		c.sent += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Send writes f as one text message.
func (b *Browser) Send(f librelay.Frame) error {
	msg, err := librelay.AppendFrame(nil, &f)
	if err != nil {
		return err
	}
	return b.SendRaw(msg)
}

// SendRaw writes msg as one text message, unvalidated.
func (b *Browser) SendRaw(msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), IOTimeout)
	defer cancel()
	return b.WS.Write(ctx, websocket.MessageText, msg)
}

// ReadRaw returns the next message as sent. A close by the relay is an error
// for which CloseCode reports the code.
func (b *Browser) ReadRaw() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), IOTimeout)
	defer cancel()
	_, msg, err := b.WS.Read(ctx)
	return msg, err
}

// Read returns the next frame.
func (b *Browser) Read() (librelay.Frame, error) {
	msg, err := b.ReadRaw()
	if err != nil {
		return librelay.Frame{}, err
	}
	return librelay.ParseFrame(msg)
}

// ReadUntilClosed reads until the relay closes the socket and returns the
// frames before the close, other than heartbeat probes (answered when
// AnswerHeartbeats is set), and the close code (-1 when the socket ended
// without one).
func (b *Browser) ReadUntilClosed() ([]librelay.Frame, relayleg.CloseCode) {
	var frames []librelay.Frame
	for {
		msg, err := b.ReadRaw()
		if err != nil {
			return frames, CloseCode(err)
		}
		f, err := librelay.ParseFrame(msg)
		switch {
		case err != nil:
		case f.Type == librelay.TypeHeartbeat && f.IsRequest():
			if b.AnswerHeartbeats {
				b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
			}
		default:
			frames = append(frames, f)
		}
	}
}

// CloseCode is the close code an error from Read carries, or -1.
func CloseCode(err error) relayleg.CloseCode { return relayleg.CloseCode(websocket.CloseStatus(err)) }

// Close ends the socket from the client side with 1000.
func (b *Browser) Close() { b.WS.Close(websocket.StatusNormalClosure, "") }

// Hello sends relay.hello for instance, asking for session back, with a
// fresh nonce and version, and returns the relay's answer and the nonce.
func (b *Browser) Hello(instance, session string, version int) (librelay.Frame, []byte, error) {
	nonce, err := librelay.NewNonce()
	if err != nil {
		return librelay.Frame{}, nil, err
	}
	payload, _ := librelay.Hello{ProtocolVersion: version, Instance: instance, Agent: "relaytest", Nonce: nonce}.MarshalJSON()
	if err := b.Send(librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: instance, Session: session, Payload: payload}); err != nil {
		return librelay.Frame{}, nil, err
	}
	f, err := b.Read()
	if err == nil && f.Type == librelay.TypeWelcome {
		b.Instance, b.Session = f.Instance, f.Session
	}
	return f, nonce, err
}

// Attach dials and completes a hello, failing the test on anything but a
// welcome whose signature verifies.
func (env *Env) Attach(t testing.TB, session string) *Browser {
	t.Helper()
	return env.AttachWith(t, session, DialOptions{})
}

// AttachWith is Attach dialling with o; an empty o.Origin sends env.Origin.
func (env *Env) AttachWith(t testing.TB, session string, o DialOptions) *Browser {
	t.Helper()
	o.Origin = cmp.Or(o.Origin, env.Origin)
	if o.TLS == nil {
		o.TLS = env.TLS
	}
	b, _, err := DialBrowser(context.Background(), env.AttachURL, env.ClientToken, o)
	if err != nil {
		t.Fatalf("dial browser leg: %v", err)
	}
	t.Cleanup(func() { b.WS.CloseNow() })
	f, nonce, err := b.Hello(env.Instance, session, librelay.ProtocolVersion)
	if err != nil {
		t.Fatalf("hello: %v", err)
	}
	if err := CheckWelcome(f, env.Key, nonce, env.Instance); err != nil {
		t.Fatal(err)
	}
	return b
}

// CheckWelcome verifies a welcome frame answering the hello "hello".
func CheckWelcome(f librelay.Frame, key ed25519.PublicKey, nonce []byte, instance string) error {
	if f.Type != librelay.TypeWelcome || f.ReplyTo != "hello" {
		return fmt.Errorf("want relay.welcome re hello, got %s re %q payload %s", f.Type, f.ReplyTo, f.Payload)
	}
	var w librelay.Welcome
	if err := w.UnmarshalJSON(f.Payload); err != nil {
		return err
	}
	return librelay.VerifyWelcome(key, nonce, w.ProtocolVersion, instance, w.Signature)
}

// Runtime is a raw runtime-leg peer.
type Runtime struct {
	Conn     net.Conn
	R        *librelay.Reader
	W        *librelay.Writer
	Instance string
	// Timeout guards each Read (IOTimeout when zero); a test that waits for
	// something the relay does after a long period raises it.
	Timeout time.Duration
}

// DialRuntime performs the runtime leg's HTTP upgrade with token. On a
// refusal it returns the HTTP status and an error.
func DialRuntime(ctx context.Context, httpURL, token string) (*Runtime, int, error) {
	return DialRuntimeTLS(ctx, httpURL, token, nil)
}

// DialRuntimeTLS is DialRuntime for an https URL too, with tc as the client
// TLS config (nil: the system roots).
func DialRuntimeTLS(ctx context.Context, httpURL, token string, tc *tls.Config) (*Runtime, int, error) {
	u, err := url.Parse(httpURL)
	if err != nil {
		return nil, 0, err
	}
	var nc net.Conn
	if u.Scheme == "https" {
		d := tls.Dialer{Config: tc}
		nc, err = d.DialContext(ctx, "tcp", u.Host)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, 0, err
	}
	nc.SetDeadline(time.Now().Add(IOTimeout))
	req, _ := http.NewRequest(http.MethodGet, httpURL+relayleg.ConnectPath, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", relayleg.UpgradeToken)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	br := bufio.NewReader(nc)
	if err := req.Write(nc); err != nil {
		nc.Close()
		return nil, 0, err
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		nc.Close()
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), relayleg.UpgradeToken) {
		nc.Close()
		return nil, resp.StatusCode, fmt.Errorf("upgrade refused: HTTP %d", resp.StatusCode)
	}
	nc.SetDeadline(time.Time{})
	return &Runtime{Conn: nc, R: librelay.NewReader(br), W: librelay.NewWriter(nc)}, resp.StatusCode, nil
}

// Send writes one frame.
func (r *Runtime) Send(f librelay.Frame) error {
	r.Conn.SetWriteDeadline(time.Now().Add(IOTimeout))
	return r.W.WriteFrame(f)
}

// SendRaw writes bytes as they are (a line must end with a newline).
func (r *Runtime) SendRaw(b []byte) error {
	r.Conn.SetWriteDeadline(time.Now().Add(IOTimeout))
	_, err := r.Conn.Write(b)
	return err
}

// Read returns the next frame.
func (r *Runtime) Read() (librelay.Frame, error) {
	r.Conn.SetReadDeadline(time.Now().Add(cmp.Or(r.Timeout, IOTimeout)))
	return r.R.ReadFrame()
}

// Hello sends relay.hello for instance at version and returns the answer and
// the nonce.
func (r *Runtime) Hello(instance string, version int) (librelay.Frame, []byte, error) {
	nonce, err := librelay.NewNonce()
	if err != nil {
		return librelay.Frame{}, nil, err
	}
	payload, _ := librelay.Hello{ProtocolVersion: version, Instance: instance, Agent: "relaytest", Nonce: nonce}.MarshalJSON()
	if err := r.Send(librelay.Frame{Type: librelay.TypeHello, ID: "hello", Instance: instance, Payload: payload}); err != nil {
		return librelay.Frame{}, nil, err
	}
	f, err := r.Read()
	if err == nil && f.Type == librelay.TypeWelcome {
		r.Instance = instance
	}
	return f, nonce, err
}

// Connect dials and completes a hello as env's runtime, failing the test on
// anything but a verified welcome.
func (env *Env) Connect(t testing.TB) *Runtime {
	t.Helper()
	r, _, err := DialRuntimeTLS(context.Background(), env.HTTPURL, env.RuntimeToken, env.TLS)
	if err != nil {
		t.Fatalf("dial runtime leg: %v", err)
	}
	t.Cleanup(func() { r.Conn.Close() })
	f, nonce, err := r.Hello(env.Instance, librelay.ProtocolVersion)
	if err != nil {
		t.Fatalf("runtime hello: %v", err)
	}
	if err := CheckWelcome(f, env.Key, nonce, env.Instance); err != nil {
		t.Fatal(err)
	}
	return r
}

// ReadCargo returns the next frame that is not relay heartbeat traffic,
// answering heartbeats as it goes.
func (r *Runtime) ReadCargo() (librelay.Frame, error) {
	for {
		f, err := r.Read()
		if err != nil || f.Type != librelay.TypeHeartbeat {
			return f, err
		}
		if f.IsRequest() {
			r.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
	}
}

// StartRuntime runs the dev runtime against env until the test ends and
// waits until it is connected. edit may change its config.
func (env *Env) StartRuntime(t testing.TB, edit func(*devruntime.Config)) *devruntime.Runtime {
	t.Helper()
	rt, _ := env.RunRuntime(t, edit)
	return rt
}

// RunRuntime is StartRuntime for a test that stops the runtime itself, as a
// runtime process that goes away would: stop ends it and waits for it (and
// may be called more than once; the test's end calls it too).
func (env *Env) RunRuntime(t testing.TB, edit func(*devruntime.Config)) (rt *devruntime.Runtime, stop func()) {
	t.Helper()
	cfg := devruntime.Config{
		Relay: env.HTTPURL, Instance: env.Instance, Credential: env.RuntimeToken, RelayKey: env.Key, TLS: env.TLS,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := devruntime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	select {
	case <-rt.Connected():
	case <-done:
		t.Fatal("runtime stopped before connecting")
	}
	return rt, stop
}

// ACP sends one JSON-RPC message as an acp.message on the browser's route.
func (b *Browser) ACP(msg string) error {
	return b.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(msg)})
}

// RPC is a JSON-RPC message as a test client reads it, with the frame's seq.
type RPC struct {
	Seq    uint64          `json:"-"`
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// ReadRPC returns the next acp.message, skipping (and answering) heartbeats;
// any other frame is an error.
func (b *Browser) ReadRPC() (RPC, error) {
	for {
		f, err := b.Read()
		if err != nil {
			return RPC{}, err
		}
		if f.Type == librelay.TypeHeartbeat {
			if f.IsRequest() {
				b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
			}
			continue
		}
		return RPCOf(f)
	}
}

// RPCOf parses an acp.message frame's payload.
func RPCOf(f librelay.Frame) (RPC, error) {
	if f.Type != librelay.TypeACPMessage {
		return RPC{}, fmt.Errorf("want acp.message, got %s %s", f.Type, f.Payload)
	}
	m := RPC{Seq: f.Seq}
	return m, json.Unmarshal(f.Payload, &m)
}

// Call sends a request with id and reads until its response, returning the
// messages before it and the response.
func (b *Browser) Call(id int, method, params string) ([]RPC, RPC, error) {
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	if err := b.ACP(req); err != nil {
		return nil, RPC{}, err
	}
	var before []RPC
	for {
		m, err := b.ReadRPC()
		if err != nil {
			return before, RPC{}, err
		}
		if m.Method == "" && string(m.ID) == strconv.Itoa(id) {
			return before, m, nil
		}
		before = append(before, m)
	}
}

// ChunkText returns the text of an agent_message_chunk session/update, or
// false for any other message.
func ChunkText(m RPC) (string, bool) {
	var p struct {
		Update struct {
			SessionUpdate string `json:"sessionUpdate"`
			Content       struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"update"`
	}
	if m.Method != "session/update" || json.Unmarshal(m.Params, &p) != nil || p.Update.SessionUpdate != "agent_message_chunk" {
		return "", false
	}
	return p.Update.Content.Text, true
}

// StartChat initializes ACP and opens a session, returning its id.
func (b *Browser) StartChat() (string, error) {
	if _, _, err := b.Call(1, "initialize", `{"protocolVersion":1}`); err != nil {
		return "", err
	}
	_, resp, err := b.Call(2, "session/new", `{"cwd":"/","mcpServers":[]}`)
	if err != nil {
		return "", err
	}
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil || r.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s %s", resp.Result, resp.Error)
	}
	return r.SessionID, nil
}

// Prompt sends session/prompt with text as request id and returns the
// streamed chunk texts, every message's seq in order, and the stop reason.
func (b *Browser) Prompt(id int, session, text string) (chunks []string, seqs []uint64, stop string, err error) {
	params := fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, session, text)
	before, resp, err := b.Call(id, "session/prompt", params)
	for _, m := range before {
		seqs = append(seqs, m.Seq)
		if c, ok := ChunkText(m); ok {
			chunks = append(chunks, c)
		}
	}
	if err != nil {
		return chunks, seqs, "", err
	}
	seqs = append(seqs, resp.Seq)
	var r struct {
		StopReason string `json:"stopReason"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		return chunks, seqs, "", fmt.Errorf("prompt answered %s %s", resp.Result, resp.Error)
	}
	return chunks, seqs, r.StopReason, nil
}
