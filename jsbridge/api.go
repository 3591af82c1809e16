//go:build js && wasm

package jsbridge

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// The JavaScript API (relay.js, relay.d.ts) is a thin layer of classes over
// the functions Register hands to relay.js. Every Promise is made in
// JavaScript: an operation is a call (op, callID, ...) that returns at once,
// and Go settles it later with bridge.resolve(callID, value) or
// bridge.reject(callID, code, message). The functions are created once, for
// the life of the module, and never block the page: anything that waits runs
// on a goroutine of its own.
//
// Handles name objects across the boundary: relay.js numbers its Relay and
// Attachment objects and Go keys its state on those numbers.

// ErrHandlerFailed: the application's onMessage threw or its Promise rejected.
// The engine then stops delivery at that message and fetches it again later.
var ErrHandlerFailed = errors.New("jsbridge: the onMessage handler failed")

var api = struct {
	mu     sync.Mutex
	relays map[int]*relay
	atts   map[int]*attachment
	calls  map[int]func() // how to cancel each pending call
}{
	relays: make(map[int]*relay),
	atts:   make(map[int]*attachment),
	calls:  make(map[int]func()),
}

// relay is one Relay object of relay.js: a Store shared by its attachments,
// so their writes of one event-loop turn go to IndexedDB together.
type relay struct {
	store *Store

	mu       sync.Mutex
	fallback *Fallback
}

// attachment is one Attachment object of relay.js.
type attachment struct {
	handle int
	relay  *relay
	att    *client.Attachment // set once Attach returned
	early  *client.Attachment // set as Attach starts (OnStart): the platform's signals reach it (live)
	out    []byte             // reused to build each delivery's entries
	slow   []byte             // reused for the payloads relay.js has no object of
}

// Register exports the API to relay.js, which resolves loadRelay once it is
// there. The module's main calls it and then blocks forever: the program must
// stay alive for JavaScript to call it.
func Register() error {
	b, err := theBridge()
	if err != nil {
		return err
	}
	fns := map[string]func([]Value) any{
		"relay":   apiRelay,
		"attach":  apiAttach,
		"send":    apiSend,
		"resume":  apiResume,
		"history": apiHistory,
		"stored":  apiStored,
		"detach":  apiDetach,
		"close":   apiClose,
		"lose":    apiLose,
		"cancel":  apiCancel,
		"online":  apiOnline,
		"probe":   apiProbe,
		"info":    apiInfo,
	}
	obj := make(map[string]any, len(fns))
	for name, fn := range fns {
		obj[name] = funcOf(fn)
	}
	_, err = call(b, "register", obj, boundary.Version)
	return err
}

// start runs op for the call callID on its own goroutine, with a context
// relay.js can cancel (an AbortSignal), and settles the call with its
// outcome. A nil result resolves to undefined.
func start(callID int, op func(ctx context.Context) (any, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	api.mu.Lock()
	api.calls[callID] = cancel
	api.mu.Unlock()
	go func() {
		v, err := op(ctx)
		api.mu.Lock()
		delete(api.calls, callID)
		api.mu.Unlock()
		cancel()
		settle(callID, v, err)
	}()
}

// settle resolves or rejects call callID in relay.js. A call its
// AbortSignal ended says so in relay.js's words (boundary.Aborted), not
// context.Canceled's; only the bare error is reworded, since a wrapped one
// carries words of its own.
func settle(callID int, v any, err error) {
	b, _ := theBridge()
	if err != nil {
		message := err.Error()
		if err == context.Canceled {
			message = boundary.Aborted
		}
		_, _ = call(b, "reject", callID, client.Code(err), message)
		return
	}
	_, _ = call(b, "resolve", callID, v)
}

// fail rejects a call that could not start.
func fail(callID int, err error) any {
	settle(callID, nil, err)
	return nil
}

var errNoAttachment = client.ErrClosed

func lookup(h int) *attachment {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.atts[h]
}

// apiRelay(callID, relayHandle, database, storage, windowMs) opens the Store
// of a new Relay: IndexedDB unless storage is "memory", writing every
// windowMs milliseconds (negative: DefaultCommitWindow).
func apiRelay(args []Value) any {
	callID, h, database, storage := jsInt(arg(args, 0)), jsInt(arg(args, 1)), jsString(arg(args, 2)), jsString(arg(args, 3))
	window := time.Duration(jsFloat(arg(args, 4)) * float64(time.Millisecond))
	r := &relay{}
	start(callID, func(ctx context.Context) (any, error) {
		if storage == "memory" {
			r.store = NewMemoryStore()
		} else {
			r.store = OpenStore(ctx, database, r.fellBack)
			if window >= 0 {
				r.store.SetCommitWindow(window)
			}
		}
		api.mu.Lock()
		api.relays[h] = r
		api.mu.Unlock()
		return r.store.Backend(), nil
	})
	return nil
}

// fellBack is the Store's fallback hook: every attachment of the relay hears
// of it through onState, with the state it is in.
func (r *relay) fellBack(f Fallback) {
	r.mu.Lock()
	r.fallback = &f
	r.mu.Unlock()
	api.mu.Lock()
	var atts []*attachment
	for _, a := range api.atts {
		if a.relay == r && a.att != nil {
			atts = append(atts, a)
		}
	}
	api.mu.Unlock()
	for _, a := range atts {
		a.onState(client.StateChange{State: a.att.State()})
	}
}

// storageInfo is what onState's info says about where state is kept.
// The reason is there only when the Store fell back from IndexedDB.
func (r *relay) storageInfo(info map[string]any) {
	info["storage"] = r.store.Backend()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fallback != nil {
		info["reason"] = r.fallback.Reason
	}
}

// apiAttach(callID, relayHandle, attachmentHandle, options) attaches. The
// options object is relay.js's normalised copy of the application's. It
// resolves to where the stream is stored (Store.place).
func apiAttach(args []Value) any {
	callID, rh, h := jsInt(arg(args, 0)), jsInt(arg(args, 1)), jsInt(arg(args, 2))
	api.mu.Lock()
	r := api.relays[rh]
	api.mu.Unlock()
	if r == nil || len(args) < 4 {
		return fail(callID, client.ErrClosed)
	}
	a := &attachment{handle: h, relay: r}
	o, err := a.options(args[3])
	if err != nil {
		return fail(callID, err)
	}
	api.mu.Lock()
	api.atts[h] = a
	api.mu.Unlock()
	start(callID, func(ctx context.Context) (any, error) {
		att, err := client.Attach(ctx, o)
		if err != nil {
			a.forget()
			return nil, err
		}
		api.mu.Lock()
		a.att = att
		api.mu.Unlock()
		go a.watch()
		return a.relay.store.place(client.Key{URL: o.URL, Instance: o.Instance, Name: o.Name}), nil
	})
	return nil
}

// options reads the attach options relay.js passes.
func (a *attachment) options(v Value) (client.Options, error) {
	opt := func(p string) Value { f, _ := get(v, p); return f }
	ms := func(p string) time.Duration { return time.Duration(jsInt(opt(p))) * time.Millisecond }
	o := client.Options{
		URL:              jsString(opt("url")),
		Instance:         jsString(opt("instance")),
		Name:             jsString(opt("name")),
		History:          jsInt(opt("history")),
		Store:            a.relay.store,
		Transport:        apiTransport{a: a, mode: a.relay.store.inboundMode(jsInt(opt("history")) > 0)},
		Credential:       a.credential,
		OnMessages:       a.deliver,
		OnState:          a.onState,
		OnEvicted:        a.onEvicted,
		OnStart:          a.started,
		HandshakeTimeout: ms("handshakeTimeoutMs"),
		ResumeTimeout:    ms("resumeTimeoutMs"),
		SendQueue:        jsInt(opt("sendQueue")),
		MaxSendBytes:     jsInt(opt("maxSendBytes")),
		Backoff:          client.Backoff{Initial: ms("backoffInitialMs"), Max: ms("backoffMaxMs")},
		Heartbeat:        client.Heartbeat{Interval: ms("heartbeatIntervalMs"), Timeout: ms("heartbeatTimeoutMs")},
		Agent:            "relaywasm-browser",
	}
	if key := jsString(opt("relayKey")); key != "" {
		pub, err := librelay.ParsePublicKey(key)
		if err != nil {
			// One line that names the option, as relay.js's own checks say.
			return o, fmt.Errorf("%w: relayKey is not a relay's public key (librelay.FormatPublicKey's): %w", client.ErrBadOptions, err)
		}
		o.RelayKey = ed25519.PublicKey(pub)
	}
	return o, nil
}

// started keeps the attachment Attach made as it starts, so that the
// browser's online and offline events and the probe of a page visible
// again reach an attach still pending (live): a page loaded offline, or
// while the relay is down, redials on the online event rather than wait
// out its backoff (up to 30 s), and shows offline while it is.
func (a *attachment) started(att *client.Attachment) {
	api.mu.Lock()
	a.early = att
	api.mu.Unlock()
}

// watch waits for the attachment to end, then forgets it and tells relay.js
// (which releases the attachment's Web Lock).
func (a *attachment) watch() {
	<-a.att.Done()
	b, _ := theBridge()
	// Still known while relay.js takes its last look at the getters.
	_, _ = call(b, "ended", a.handle)
	a.forget()
}

// forget lets the attachment go, and the payloads relay.js holds for its
// transcript: it commits no more.
func (a *attachment) forget() {
	api.mu.Lock()
	delete(api.atts, a.handle)
	api.mu.Unlock()
	if b, err := theBridge(); err == nil {
		_, _ = call(b, "releaseHeld", a.handle)
	}
}

// credential asks relay.js for the token (a string, or what the application's
// token function resolves to), on every dial. relay.js refuses with the code
// "superseded" when the tab's slot for the stream went to another tab while
// the page was in the back/forward cache (tabs.js): the attachment then ends
// with client.ErrSuperseded instead of dialling (Options.Credential).
func (a *attachment) credential(ctx context.Context) (string, error) {
	b, err := theBridge()
	if err != nil {
		return "", err
	}
	id, events, stop := newWait()
	defer stop()
	if _, err := call(b, "token", a.handle, id); err != nil {
		return "", err
	}
	select {
	case ev := <-events:
		if ev.kind != boundary.DoneOK {
			if jsField(ev.value, "code") == client.ErrSuperseded.Code() {
				return "", &refusal{client.ErrSuperseded, jsField(ev.value, "message")}
			}
			return "", errors.New("jsbridge: the token function failed: " + jsField(ev.value, "message"))
		}
		return jsString(ev.value), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// refusal is relay.js's refusal of a dial: a sentinel of the engine's, so
// that it acts on it and reports its code, with relay.js's words for what
// happened.
type refusal struct {
	sentinel *client.Error
	why      string
}

func (e *refusal) Error() string { return e.sentinel.Error() + ": " + e.why }
func (e *refusal) Unwrap() error { return e.sentinel }

// deliver hands one batch to the application. relay.js holds the parsed
// object of nearly every message, under the message's Ref (frames.go);
// deliver tells it which, per message two float64s in the bridge's out
// buffer: flags (boundary.DeliverReplay, DeliverText) and the Ref, or for a
// message relay.js has no object of (Ref 0) its place in a JSON text
// [[seq, payload], …] passed along, parsed there once. relay.js answers how
// many messages the handler accepted, at once, or later (-1-i, i the
// messages accepted before it) when a handler returned a Promise; a Promise
// is waited for until ctx ends (the attachment closed or detached), and what
// it had not accepted by then is not counted. close() and detach() send
// relay.js's count of a batch a Promise holds before they reach Go, so a
// count already there when ctx ends is the one taken.
func (a *attachment) deliver(ctx context.Context, batch []client.Message) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	out, slow := a.out[:0], a.slow[:0]
	nslow := 0
	for _, m := range batch {
		flags, ref := 0.0, float64(m.Ref)
		if m.Replay {
			flags = boundary.DeliverReplay
		}
		if m.Ref == 0 {
			flags += boundary.DeliverText
			ref = float64(nslow)
			nslow++
			slow = appendSlow(slow, m)
		}
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(flags))
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(ref))
	}
	a.out, a.slow = out, slow
	var session, text any // null unless some message was not parsed by relay.js
	if nslow > 0 {
		slow = append(slow, ']')
		a.slow = slow
		session = batch[0].Session
		text = unsafe.String(unsafe.SliceData(slow), len(slow))
	}
	id, events, stop := newWait()
	defer stop()
	res, err := withOut(out, "deliver", a.handle, len(batch), id, session, text)
	if err != nil {
		return 0, err
	}
	n := jsInt(res)
	if n < 0 {
		select {
		case ev := <-events:
			n = jsInt(ev.value)
		case <-ctx.Done():
			select {
			case ev := <-events: // relay.js counted the batch before Close or Detach came
				n = jsInt(ev.value)
			default:
				return -n - 1, ctx.Err() // those before the Promise were accepted
			}
		}
	}
	if n < len(batch) {
		return n, ErrHandlerFailed
	}
	return n, nil
}

// appendSlow adds [seq, payload, trace] to the JSON text of the messages
// relay.js has no object of (the closing bracket is added at the end).
func appendSlow(buf []byte, m client.Message) []byte {
	if len(buf) == 0 {
		buf = append(buf, '[')
	} else {
		buf = append(buf, ',')
	}
	buf = append(buf, '[')
	buf = strconv.AppendUint(buf, m.Seq, 10)
	buf = append(buf, ',')
	buf = appendPayload(buf, m.Payload)
	buf = append(buf, ',')
	buf = strconv.AppendQuote(buf, m.Trace) // a trace id is printable ASCII: Go's quoting is JSON's
	return append(buf, ']')
}

// appendPayload splices a payload into a JSON text; an absent one is null.
func appendPayload(buf, payload []byte) []byte {
	if len(payload) == 0 {
		return append(buf, "null"...)
	}
	return append(buf, payload...)
}

// onState reports a state change to the application, with why and where the
// state is kept.
func (a *attachment) onState(sc client.StateChange) {
	info := map[string]any{"attempt": sc.Attempt, "resumable": sc.Resumable}
	if sc.RetryIn > 0 {
		info["retryInMs"] = sc.RetryIn.Milliseconds()
	}
	if sc.Err != nil {
		info["code"] = client.Code(sc.Err)
		info["message"] = sc.Err.Error()
	}
	a.relay.storageInfo(info)
	b, _ := theBridge()
	_, _ = call(b, "state", a.handle, sc.State.String(), info)
}

func (a *attachment) onEvicted(e client.Eviction) {
	b, _ := theBridge()
	_, _ = call(b, "evicted", a.handle, map[string]any{
		"afterSeq": float64(e.AfterSeq),
		"fromSeq":  float64(e.FromSeq),
		"reason":   e.Reason,
	})
}

// withAttachment runs op on attachment h for call callID, rejecting the call
// when the attachment is gone or not attached yet.
func withAttachment(args []Value, op func(ctx context.Context, att *client.Attachment) (any, error)) any {
	callID := jsInt(arg(args, 0))
	att := attached(jsInt(arg(args, 1)))
	if att == nil {
		return fail(callID, errNoAttachment)
	}
	start(callID, func(ctx context.Context) (any, error) { return op(ctx, att) })
	return nil
}

// attached is attachment h's client.Attachment, nil when h is gone or not
// attached yet.
func attached(h int) *client.Attachment {
	a := lookup(h)
	api.mu.Lock()
	defer api.mu.Unlock()
	if a == nil {
		return nil
	}
	return a.att
}

// apiSend(callID, handle, n, buffer, trace) sends one ACP message: the n
// bytes of JSON text relay.js put in the in buffer (buffer: it, when new;
// null), with the frame's trace id ("" for none).
func apiSend(args []Value) any {
	payload, err := readIn(nil, jsInt(arg(args, 2)), arg(args, 3))
	if err != nil {
		return fail(jsInt(arg(args, 0)), err)
	}
	trace := jsString(arg(args, 4))
	callID := jsInt(arg(args, 0))
	att := attached(jsInt(arg(args, 1)))
	if att == nil {
		return fail(callID, errNoAttachment)
	}
	// No goroutine of its own, unlike the other calls: the engine's
	// goroutine takes the message from this callback and settles the call
	// right after the write (StartSendACP), which is most of what a round
	// trip costs the page otherwise. The cancel hook withdraws the message
	// as a cancelled ctx would; it is registered first since done may run
	// before StartSendACP returns.
	var withdraw func(error)
	api.mu.Lock()
	api.calls[callID] = func() {
		api.mu.Lock()
		w := withdraw
		api.mu.Unlock()
		if w != nil {
			w(context.Canceled)
		}
	}
	api.mu.Unlock()
	w := att.StartSendACP(payload, func(err error) {
		api.mu.Lock()
		delete(api.calls, callID)
		api.mu.Unlock()
		settle(callID, nil, err)
	}, client.WithTrace(trace))
	api.mu.Lock()
	if _, waiting := api.calls[callID]; waiting {
		withdraw = w
	}
	api.mu.Unlock()
	return nil
}

// apiResume(callID, handle, afterSeq).
func apiResume(args []Value) any {
	after := jsSeq(arg(args, 2))
	return withAttachment(args, func(ctx context.Context, att *client.Attachment) (any, error) {
		return nil, att.Resume(ctx, after)
	})
}

// apiHistory(callID, handle) resolves to the attachment's transcript as
// historyJSON's text.
func apiHistory(args []Value) any {
	return withAttachment(args, func(ctx context.Context, att *client.Attachment) (any, error) {
		h, err := att.History(ctx)
		if err != nil {
			return nil, err
		}
		return historyJSON(h), nil
	})
}

// apiStored(callID, relayHandle, url, instance, name, forget) resolves to
// the stored transcript of a stream, as historyJSON's text, read from the
// Relay's Store without attaching. It is what a page shows before the relay
// answers (offline, or while it redials): attach resolves only once the
// relay welcomed the client, and Attachment.history is an attachment's.
// The read goes no further than the Store, so it needs no network, and a
// stream this page has attached is written first (Store.History), so the
// read is what the stream's attachment would read.
//
// With forget true it deletes the stream from the Store instead
// (Store.Clear: state and transcript), and resolves to undefined:
// relay.js's Relay.forget, for a shared device whose user logs out, offline
// too. relay.js refuses that while an attachment holds the stream, and
// holds its slot meanwhile. One call for both keeps relay.wasm smaller
// than a function of its own did (3 KB raw).
func apiStored(args []Value) any {
	callID := jsInt(arg(args, 0))
	api.mu.Lock()
	r := api.relays[jsInt(arg(args, 1))]
	api.mu.Unlock()
	if r == nil {
		return fail(callID, client.ErrClosed)
	}
	k := client.Key{URL: jsString(arg(args, 2)), Instance: jsString(arg(args, 3)), Name: jsString(arg(args, 4))}
	if jsBool(arg(args, 5)) {
		start(callID, func(ctx context.Context) (any, error) { return nil, r.store.Clear(ctx, k) })
		return nil
	}
	start(callID, func(ctx context.Context) (any, error) {
		h, err := r.store.History(ctx, k)
		if err != nil {
			return nil, err
		}
		return historyJSON(client.PlaceLosses(h)), nil
	})
	return nil
}

// historyJSON is a transcript as relay.js parses it: [[out, seq, payload],
// …], out 1 for a message this page sent, and a loss as [0, 0, null,
// {reason, afterSeq, fromSeq}]. Built by hand: the payloads are JSON text
// already, and encoding/json is not linked into relay.wasm.
func historyJSON(h []client.Entry) string {
	buf := []byte{'['}
	for i, e := range h {
		if i > 0 {
			buf = append(buf, ',')
		}
		if e.Lost != nil {
			buf = appendLostJSON(buf, e.Lost)
			continue
		}
		if e.Out {
			buf = append(buf, "[1,"...)
		} else {
			buf = append(buf, "[0,"...)
		}
		buf = strconv.AppendUint(buf, e.Seq, 10)
		buf = append(buf, ',')
		buf = appendPayload(buf, e.Payload)
		buf = append(buf, ']')
	}
	return string(append(buf, ']'))
}

// appendLostJSON adds a loss's history entry (historyJSON). A reason is
// an ASCII identifier (jsbridge/store.go lostOf): Go's quoting is JSON's.
func appendLostJSON(buf []byte, l *client.Eviction) []byte {
	buf = append(buf, `[0,0,null,{"reason":`...)
	buf = strconv.AppendQuote(buf, l.Reason)
	buf = append(buf, `,"afterSeq":`...)
	buf = strconv.AppendUint(buf, l.AfterSeq, 10)
	buf = append(buf, `,"fromSeq":`...)
	buf = strconv.AppendUint(buf, l.FromSeq, 10)
	return append(buf, "}]"...)
}

// apiDetach(callID, handle). It resolves once the stream's state is gone
// from the Store too.
func apiDetach(args []Value) any {
	store := storeOf(jsInt(arg(args, 1)))
	return withAttachment(args, func(ctx context.Context, att *client.Attachment) (any, error) {
		if err := att.Detach(ctx); err != nil {
			return nil, err
		}
		return nil, store.Flush(ctx)
	})
}

// apiClose(callID, handle) ends the attachment in this page without
// detaching; the stream stays reclaimable. It resolves once the cursor is
// stored, so an attach right after it resumes from there.
func apiClose(args []Value) any { return abandon(args, client.ErrClosed) }

// apiLose(callID, handle, why) ends the attachment as close does, with
// client.ErrSuperseded and relay.js's words why: the page's slot for the
// stream went to another tab while the page was in the back/forward cache,
// and the page's socket outlived the cache, so no dial would have been
// refused (credential). The other tab, attached with an id of its own, goes
// on; this page must not go on beside it under the same slot.
func apiLose(args []Value) any {
	return abandon(args, &refusal{client.ErrSuperseded, jsString(arg(args, 2))})
}

// abandon ends attachment args[1] for cause without detaching, and
// resolves call args[0] once the cursor is stored (Attachment.Abandon;
// Close is Abandon with client.ErrClosed).
func abandon(args []Value, cause error) any {
	store := storeOf(jsInt(arg(args, 1)))
	return withAttachment(args, func(ctx context.Context, att *client.Attachment) (any, error) {
		att.Abandon(cause)
		return nil, store.Flush(ctx)
	})
}

// storeOf is the Store of attachment h's Relay (nil when h is gone, in
// which case withAttachment rejects the call before it is used).
func storeOf(h int) *Store {
	if a := lookup(h); a != nil {
		return a.relay.store
	}
	return nil
}

// apiCancel(callID) cancels a pending call (relay.js: its AbortSignal fired).
func apiCancel(args []Value) any {
	api.mu.Lock()
	cancel := api.calls[jsInt(arg(args, 0))]
	api.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}

// apiOnline(online) passes the browser's online/offline events to every
// attachment, an attach still pending included. Coming online also probes
// each: one waiting to redial that never heard it was offline (the page
// loaded so, the relay was down, the network changed under an open
// socket) redials at once, and an open one checks its socket, which the
// network's change may have left dead.
func apiOnline(args []Value) any {
	online := true
	if len(args) > 0 {
		online = jsBool(args[0])
	}
	for _, att := range live() {
		att.SetOnline(online)
		if online {
			att.Probe()
		}
	}
	return nil
}

// apiProbe() checks every connection, when the page becomes visible again.
func apiProbe([]Value) any {
	for _, att := range live() {
		att.Probe()
	}
	return nil
}

// live is every attachment, those whose attach is still pending included
// (started).
func live() []*client.Attachment {
	api.mu.Lock()
	defer api.mu.Unlock()
	out := make([]*client.Attachment, 0, len(api.atts))
	for _, a := range api.atts {
		if a.early != nil {
			out = append(out, a.early)
		}
	}
	return out
}

// apiInfo(handle) returns [state, cursor, session] for the Attachment's
// getters, or null once it is gone.
func apiInfo(args []Value) any {
	a := lookup(jsInt(arg(args, 0)))
	if a == nil {
		return nil
	}
	api.mu.Lock()
	att := a.att
	api.mu.Unlock()
	if att == nil {
		return []any{client.Connecting.String(), 0, ""}
	}
	return []any{att.State().String(), float64(att.Cursor()), att.Session()}
}

// jsSeq reads a seq, which JavaScript holds as a number (exact to 2^53);
// anything negative or not a number is 0.
func jsSeq(v Value) uint64 {
	return uint64(max(jsFloat(v), 0))
}
