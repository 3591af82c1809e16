//go:build js && wasm

package jsbridge

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/hack-pad/safejs"
	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// DefaultDatabase is the IndexedDB database a Store uses unless told otherwise.
const DefaultDatabase = boundary.StoreDatabase

// Why a Store fell back to memory; the JavaScript API reports the reason
// through onState as {storage: "memory", reason}.
const (
	FallbackUnavailable = boundary.FallbackUnavailable // no indexedDB in this page, or open refused outright
	FallbackBlocked     = boundary.FallbackBlocked     // another connection blocks the open, or any transaction for 10 s
	FallbackFailed      = boundary.FallbackFailed      // an open, a read or a write failed
	FallbackQuota       = boundary.FallbackQuota       // the origin is out of storage
)

// Fallback tells that a Store keeps state in memory from now on, and why.
type Fallback struct {
	Reason string
	Err    error
}

// DOMError is an IndexedDB failure as the browser reported it.
type DOMError struct {
	Name    string // e.g. "QuotaExceededError", "AbortError"
	Message string
}

func (e *DOMError) Error() string { return "jsbridge: IndexedDB: " + e.Name + ": " + e.Message }

// DefaultCommitWindow is how long a Store gathers commits before writing
// them (see Store).
const DefaultCommitWindow = boundary.DefaultCommitWindowMs * time.Millisecond

// Store is a client.Store in the page's IndexedDB. All of it is relay.js's
// store.js: the schema, the commit window, the transactions, trimming and
// the fall back to memory; Store is the adapter that packs and unpacks the
// transcript's entries and waits for the outcomes.
//
// Commit only queues. The commits of a commit window (CommitWindow, 50 ms
// by default), for every stream, go to IndexedDB together in one readwrite
// transaction, and within it the state record and the transcript chunk of a
// stream are written together, so after any interruption the stored cursor
// and the stored transcript agree.
//
// The window is a trade. An IndexedDB transaction costs the page about a
// millisecond of main-thread time here, whether it carries one commit or a
// thousand: once per event-loop turn it was a third of what a streamed
// frame cost the page. In exchange the stored cursor may be up to a window
// behind what the application has handled, and a page that dies without
// warning (a crash, a killed tab) resumes from there: the messages of that
// window are delivered again (not marked as replays), and none is lost; the
// transcript and the stored cursor still agree. A page that goes away
// normally loses nothing: on pagehide, and when it is hidden, every store
// writes at once, and Flush, a read (Load, History) and Clear write first
// too, so a Store reads its own writes and close() and detach() resolve only
// once the cursor is stored. A commit that changes a stream's attachment id
// is written at once.
//
// When IndexedDB is missing or fails, the store keeps working in memory,
// seeded with the state it knows, and reports a Fallback once. It never
// panics into a JavaScript callback.
type Store struct {
	h          int                 // store.js's handle; 0 for NewMemoryStore's
	mem        *client.MemoryStore // NewMemoryStore's
	onFallback func(Fallback)

	mu       sync.Mutex
	streams  map[client.Key]int // store.js's numbers for the streams
	reported bool
	session  struct { // the last session committed, and its JavaScript string
		text  string
		value Value
	}

	// entries packs a Commit's entries before they cross. One buffer kept
	// for the Store, not one grown per commit: with a transcript every
	// batch commits its payloads, and growing a fresh slice each time was
	// the largest share of the page's Go allocation (make bench's
	// transcript profile).
	entries struct {
		sync.Mutex
		b []byte
	}
}

// OpenStore opens (creating if needed) the IndexedDB database and returns a
// Store on it. It does not fail: when IndexedDB cannot be used the Store is
// in memory from the start, and onFallback (which may be nil) is told why
// before OpenStore returns.
func OpenStore(ctx context.Context, database string, onFallback func(Fallback)) *Store {
	s := &Store{onFallback: onFallback, streams: make(map[client.Key]int)}
	b, err := theBridge()
	if err != nil {
		s.mem = client.NewMemoryStore()
		s.fellBack(Fallback{Reason: FallbackUnavailable, Err: err})
		return s
	}
	id, opened, stop := newWait()
	defer stop()
	fid, fell, _ := newWait() // lives as long as the page: a store falls back at most once
	h, err := call(b, "storeOpen", id, database, -1, fid)
	if err != nil {
		s.mem = client.NewMemoryStore()
		s.fellBack(Fallback{Reason: FallbackUnavailable, Err: err})
		return s
	}
	s.h = jsInt(h)
	go func() {
		<-fell
		s.check()
	}()
	select {
	case <-opened:
	case <-ctx.Done(): // store.js goes on opening; the calls below wait for it
	}
	s.check()
	return s
}

// NewMemoryStore returns a Store that keeps state in memory only, for a page
// that asked for no persistence (loadRelay's storage: "memory"): nothing
// outlives the page, and nothing is reported as a fallback, since nothing
// failed.
func NewMemoryStore() *Store {
	return &Store{mem: client.NewMemoryStore()}
}

// SetCommitWindow changes how long the Store gathers commits before writing
// them; 0 writes at the end of each event-loop turn. See Store for the
// trade.
func (s *Store) SetCommitWindow(d time.Duration) {
	if s.mem == nil {
		s.do("storeWindow", max(d, 0).Milliseconds())
	}
}

// WriteAll has every IndexedDB Store of the page write what it has queued
// at once, in transactions committed at once, without waiting for them: the
// page is going away (pagehide) or may be (hidden). Each transaction is
// started before WriteAll returns. relay.js does this itself on those
// events.
func WriteAll() {
	if b, err := theBridge(); err == nil {
		_, _ = call(b, "storeWriteAll")
	}
}

// Backend says where the Store keeps state: "indexeddb" or "memory".
func (s *Store) Backend() string {
	if s.mem != nil {
		return "memory"
	}
	return jsString(s.do("storeBackend"))
}

// Load implements client.Store.
func (s *Store) Load(ctx context.Context, k client.Key) (client.Saved, error) {
	if s.mem != nil {
		return s.mem.Load(ctx, k)
	}
	v, err := s.await(ctx, "storeLoad", k)
	if err != nil {
		return client.Saved{}, err
	}
	session, _ := v.Index(0)
	cursor, _ := v.Index(1)
	open, _ := v.Index(2) // undefined (false) in a record written before it was kept
	return client.Saved{Session: jsString(session), Cursor: jsSeq(cursor), PlaceOpen: jsBool(open)}, nil
}

// Commit implements client.Store. It queues the write and returns; see Store.
func (s *Store) Commit(ctx context.Context, k client.Key, saved client.Saved, entries []client.Entry, keep int) error {
	if s.mem != nil {
		return s.mem.Commit(ctx, k, saved, entries, keep)
	}
	if keep <= 0 {
		entries = nil // no transcript: the state alone
	} else {
		entries = entries[max(0, len(entries)-keep):]
	}
	stream, err := s.stream(k)
	if err != nil {
		return err
	}
	session := s.sessionValue(saved.Session)
	s.entries.Lock()
	defer s.entries.Unlock()
	data := s.entries.b[:0]
	held := 0
	for _, e := range entries {
		if isHeld(e) {
			data = appendHeld(data, e)
			held++
		} else {
			data = appendEntry(data, e)
		}
	}
	if cap(data) <= maxKeptEntries {
		s.entries.b = data
	}
	_, err = withOut(data, "storeCommit", s.h, stream, session, float64(saved.Cursor), keep, len(entries), len(data), held, saved.PlaceOpen)
	return err
}

// inboundMode is how an attachment's sockets hand messages over with this
// Store (boundary.ModeParse*): with a transcript kept in relay.js's store,
// relay.js holds the payloads for it (ModeParseHold), so that they never
// cross into Go and back; one kept in Go (NewMemoryStore's) needs them here.
func (s *Store) inboundMode(transcript bool) int {
	switch {
	case !transcript:
		return boundary.ModeParse
	case s.mem != nil:
		return boundary.ModeParseKeep
	}
	return boundary.ModeParseHold
}

// maxKeptEntries bounds the buffer a Store keeps for packing entries: a
// burst larger than this packs into a buffer of its own, dropped after.
const maxKeptEntries = 1 << 20

// sessionValue is session as a JavaScript string, made once per session
// rather than once per commit (each new string is a call across and a
// reference Go must later release).
func (s *Store) sessionValue(session string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session.text != session || s.session.value.IsUndefined() {
		v, err := safejs.ValueOf(session)
		if err != nil {
			return session
		}
		s.session.text, s.session.value = session, v
	}
	return s.session.value
}

// History implements client.Store.
func (s *Store) History(ctx context.Context, k client.Key) ([]client.Entry, error) {
	if s.mem != nil {
		return s.mem.History(ctx, k)
	}
	v, err := s.await(ctx, "storeHistory", k)
	if err != nil {
		return nil, err
	}
	keepV, _ := v.Index(0)
	chunks, _ := v.Index(1)
	if !isObject(chunks) {
		return nil, nil
	}
	size, _ := chunks.Length()
	buf := make([]byte, size) // the entries' payloads point into it
	if _, err := safejs.CopyBytesToGo(buf, chunks); err != nil {
		return nil, err
	}
	out := decodeEntries(nil, buf)
	if over := len(out) - jsInt(keepV); over > 0 {
		out = out[over:]
	}
	return out, nil
}

// Clear implements client.Store.
func (s *Store) Clear(ctx context.Context, k client.Key) error {
	if s.mem != nil {
		return s.mem.Clear(ctx, k)
	}
	_, err := s.await(ctx, "storeClear", k)
	return err
}

// Flush waits until every Commit made so far is in IndexedDB (or the Store
// has fallen back to memory). Commit returns before its write lands; an
// attachment closed in this page flushes, so that the next attach of the
// stream, through any Store on the same database, starts from its cursor.
func (s *Store) Flush(ctx context.Context) error {
	if s.mem != nil {
		return ctx.Err()
	}
	if _, err := s.wait(ctx, "storeFlush"); err != nil {
		return err
	}
	return ctx.Err()
}

// place is where k's stream is kept in store.js: [the store's handle, the
// stream's number], or null for a Store in memory. Worker mode's page
// commits there what its handlers accepted in the moment before it went
// away, whose commit from the worker had not arrived (remote.js).
func (s *Store) place(k client.Key) any {
	if s.mem != nil {
		return nil
	}
	n, err := s.stream(k)
	if err != nil {
		return nil
	}
	return []any{s.h, n}
}

// stream is store.js's number for k.
func (s *Store) stream(k client.Key) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.streams[k]; ok {
		return n, nil
	}
	b, err := theBridge()
	if err != nil {
		return 0, err
	}
	v, err := call(b, "storeStream", s.h, k.URL, k.Instance, k.Name)
	if err != nil {
		return 0, err
	}
	s.streams[k] = jsInt(v)
	return s.streams[k], nil
}

// await runs store.js's operation op on k's stream and waits for its outcome.
func (s *Store) await(ctx context.Context, op string, k client.Key) (Value, error) {
	stream, err := s.stream(k)
	if err != nil {
		return safejs.Undefined(), err
	}
	return s.wait(ctx, op, stream)
}

// wait calls op(handle, id, args…) and waits for what it reports to id. A
// failure that made the store fall back is reported (onFallback) before
// wait returns.
func (s *Store) wait(ctx context.Context, op string, args ...any) (Value, error) {
	b, err := theBridge()
	if err != nil {
		return safejs.Undefined(), err
	}
	id, events, stop := newWait()
	defer stop()
	if _, err := call(b, op, append([]any{s.h, id}, args...)...); err != nil {
		return safejs.Undefined(), err
	}
	select {
	case ev := <-events:
		s.check()
		if ev.kind != boundary.DoneOK {
			return safejs.Undefined(), domError(ev.value)
		}
		return ev.value, nil
	case <-ctx.Done():
		return safejs.Undefined(), ctx.Err()
	}
}

// do calls store.js's synchronous op(handle, args…).
func (s *Store) do(op string, args ...any) Value {
	b, err := theBridge()
	if err != nil {
		return safejs.Undefined()
	}
	v, _ := call(b, op, append([]any{s.h}, args...)...)
	return v
}

// check reports the store's fall back, once, if it has fallen back.
func (s *Store) check() {
	v := s.do("storeFallback")
	if !isObject(v) {
		return
	}
	reason, _ := v.Index(0)
	name, _ := v.Index(1)
	msg, _ := v.Index(2)
	s.fellBack(Fallback{Reason: jsString(reason), Err: &DOMError{Name: jsString(name), Message: jsString(msg)}})
}

func (s *Store) fellBack(f Fallback) {
	s.mu.Lock()
	first := !s.reported
	s.reported = true
	s.mu.Unlock()
	if first && s.onFallback != nil {
		s.onFallback(f)
	}
}

// domError is the Error store.js reports a failure with.
func domError(v Value) error {
	return &DOMError{Name: jsField(v, "name"), Message: jsField(v, "message")}
}

// appendEntry packs one transcript entry: a flags byte
// (boundary.EntryOutbound), the seq and the payload length as uvarints, then
// the payload. store.js keeps packed entries without reading them. A loss
// is packed as boundary.EntryLost says.
func appendEntry(dst []byte, e client.Entry) []byte {
	if e.Lost != nil {
		return appendLost(dst, e.Lost)
	}
	var flags byte
	if e.Out {
		flags |= boundary.EntryOutbound
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(e.Payload)))
	return append(dst, e.Payload...)
}

// appendLost packs a loss: boundary.EntryLost, seq 0, and the Eviction's
// fields as the payload.
func appendLost(dst []byte, l *client.Eviction) []byte {
	size := uvarintLen(l.AfterSeq) + uvarintLen(l.FromSeq) + len(l.Reason)
	dst = append(dst, boundary.EntryLost, 0)
	dst = binary.AppendUvarint(dst, uint64(size))
	dst = binary.AppendUvarint(dst, l.AfterSeq)
	dst = binary.AppendUvarint(dst, l.FromSeq)
	return append(dst, l.Reason...)
}

// lostOf reads a loss's payload (appendLost); ok is false if it is not one.
func lostOf(p []byte) (l *client.Eviction, ok bool) {
	after, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, false
	}
	from, m := binary.Uvarint(p[n:])
	if m <= 0 {
		return nil, false
	}
	reason := p[n+m:]
	for _, c := range reason {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' {
			return nil, false // a reason is an ASCII identifier
		}
	}
	return &client.Eviction{AfterSeq: after, FromSeq: from, Reason: string(reason)}, true
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], v))
}

// isHeld says whether e's payload is one relay.js holds: a received message
// with a ref and no payload, which only a ModeParseHold socket's frames are
// (inboundMode). relay.js holds an empty payload as none, for a message
// whose text Go read.
func isHeld(e client.Entry) bool { return !e.Out && e.Ref != 0 && len(e.Payload) == 0 }

// appendHeld packs an entry whose payload relay.js holds: its flags with
// boundary.EntryHeld, the seq and the ref as uvarints. relay.js puts the
// payload in (entries.js unhold) before the store keeps the entry.
func appendHeld(dst []byte, e client.Entry) []byte {
	dst = append(dst, boundary.EntryHeld)
	dst = binary.AppendUvarint(dst, e.Seq)
	return binary.AppendUvarint(dst, e.Ref)
}

// nextEntry unpacks the entry at the start of b and returns the rest; ok is
// false at the end or on bytes that are not an entry.
func nextEntry(b []byte) (e client.Entry, rest []byte, ok bool) {
	if len(b) == 0 {
		return e, nil, false
	}
	flags := b[0]
	e.Out = flags&boundary.EntryOutbound != 0
	b = b[1:]
	seq, n := binary.Uvarint(b)
	if n <= 0 {
		return e, nil, false
	}
	b = b[n:]
	size, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < size {
		return e, nil, false
	}
	b = b[n:]
	if flags&boundary.EntryLost != 0 {
		lost, ok := lostOf(b[:size])
		return client.Entry{Lost: lost}, b[size:], ok
	}
	e.Seq = seq
	e.Payload = b[:size:size]
	return e, b[size:], true
}

// decodeEntries appends the entries packed in b to out. Their payloads point
// into b, which the caller gives up.
func decodeEntries(out []client.Entry, b []byte) []client.Entry {
	for {
		e, rest, ok := nextEntry(b)
		if !ok {
			return out
		}
		out = append(out, e)
		b = rest
	}
}
