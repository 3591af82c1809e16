//go:build js && wasm

package jsbridge

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"sync"
	"syscall/js"
	"time"

	"github.com/relaywasm/relaywasm/wasm/client"
)

// DefaultDatabase is the IndexedDB database a Store uses unless told otherwise.
const DefaultDatabase = "relaywasm"

// Why a Store fell back to memory; the JavaScript API reports the reason
// through onState as {storage: "memory", reason}.
const (
	FallbackUnavailable = "indexeddb_unavailable" // no indexedDB in this page, or open refused outright
	FallbackBlocked     = "indexeddb_blocked"     // another connection blocks the open
	FallbackFailed      = "indexeddb_failed"      // an open or a write failed
	FallbackQuota       = "quota_exceeded"        // the origin is out of storage
)

// Fallback tells that a Store keeps state in memory from now on, and why.
type Fallback struct {
	Reason string
	Err    error
}

// Object stores of the database (version 1):
//
//	state:  [url, instance, name]        -> {session, cursor, total, keep}
//	chunks: [url, instance, name, start] -> Uint8Array of entries
//
// A chunk holds the transcript entries of one write, packed (see
// appendEntry); start is the index of its first entry in the stream's
// transcript since it began (total counts them), so chunks sort in order and
// trimming the oldest is one range delete. A chunk is one value rather than a
// record per entry because IndexedDB's cost is per record.
const (
	dbVersion    = 1
	openTimeout  = 5 * time.Second
	storeState   = "state"  // relay.js STORE_STATE, which writes
	storeChunks  = "chunks" // relay.js STORE_CHUNKS
	maxChunkKey  = 1 << 53  // above every start (a JavaScript number's exact range)
	flagOutbound = 1
)

// Store is a client.Store in the page's IndexedDB.
//
// Commit only queues. The commits of a commit window (CommitWindow, 50 ms
// by default), for every stream, go to IndexedDB together in one readwrite
// transaction, and while it is in flight the next ones wait for the next
// window. Within a transaction the state record and the transcript chunk of
// a stream are written together, so after any interruption the stored
// cursor and the stored transcript agree.
//
// The window is a trade. An IndexedDB transaction costs the page about a
// millisecond of main-thread time here (opening it, the requests, the
// events that report them), whether it carries one commit or a thousand:
// once per event-loop turn it was a third of what a streamed frame cost the
// page, and most of a round trip's. In exchange the stored cursor may be
// up to a window behind what the application has handled, and a page that
// dies without warning (a crash, a killed tab) resumes from there: the
// messages of that window are delivered again (not marked as replays), and
// none is lost; the transcript and the stored cursor still agree, so a page
// that redraws from History and appends what is delivered after it shows
// every message once. A page that goes away normally loses nothing: on
// pagehide, and when it is hidden, every Store writes at once (Final: the
// whole transaction is issued before the event returns and committed at
// once), and Flush, a read (Load, History) and Clear write first too, so a
// Store reads its own writes and close() and detach() resolve only once the
// cursor is stored.
//
// When IndexedDB is missing or fails, the Store keeps working in a
// client.MemoryStore, seeded with the state it knows, and reports a Fallback
// once. It never panics into a JavaScript callback.
//
// A commit that changes a stream's attachment id is written at once, not
// after the window: the id is what lets a page that crashes resume the
// stream at all, where a cursor a window old only means a few messages
// again.
type Store struct {
	db         js.Value
	onFallback func(Fallback)
	kick       chan struct{} // something is queued: start a window
	now        chan struct{} // wakes the writer before the window ends

	mu       sync.Mutex
	mem      *client.MemoryStore // set once IndexedDB is given up
	window   time.Duration
	pending  []commit        // queued, not yet in a transaction
	writing  bool            // a write is scheduled or running
	urgent   int             // write now: 0 no, writeNow, writeFinal
	drained  []chan struct{} // closed when nothing is queued or written
	known    map[client.Key]stateRecord
	fellBack bool
}

// DefaultCommitWindow is how long a Store gathers commits before writing
// them (see Store).
const DefaultCommitWindow = 50 * time.Millisecond

// How soon the writer is asked to write (Store.urgent).
const (
	writeNow   = 1 // a Flush or a read waits for it
	writeFinal = 2 // the page is going away
)

// commit is one queued Commit, its entries already packed.
type commit struct {
	key   client.Key
	saved client.Saved
	keep  int
	n     int    // entries in data
	data  []byte // appendEntry × n
}

// OpenStore opens (creating if needed) the IndexedDB database and returns a
// Store on it. It does not fail: when IndexedDB cannot be used the Store is
// in memory from the start, and onFallback (which may be nil) is told why.
func OpenStore(ctx context.Context, database string, onFallback func(Fallback)) *Store {
	if database == "" {
		database = DefaultDatabase
	}
	s := newStore()
	s.onFallback = onFallback
	// Some browsers leave an open unanswered in some private modes; the
	// page must not wait on IndexedDB for ever.
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	db, reason, err := openDB(ctx, database)
	if err != nil {
		s.mem = client.NewMemoryStore()
		s.report(reason, err)
		return s
	}
	s.db = db
	stores.add(s)
	go s.writer()
	return s
}

func newStore() *Store {
	return &Store{
		kick: make(chan struct{}, 1), now: make(chan struct{}, 1),
		window: DefaultCommitWindow, known: make(map[client.Key]stateRecord),
	}
}

// SetCommitWindow changes how long the Store gathers commits before writing
// them; 0 writes at the end of each event-loop turn. See Store for the
// trade.
func (s *Store) SetCommitWindow(d time.Duration) {
	s.mu.Lock()
	s.window = max(d, 0)
	s.mu.Unlock()
}

// stores are the page's IndexedDB Stores, which WriteAll writes out when
// the page goes away.
var stores storeList

type storeList struct {
	mu  sync.Mutex
	all []*Store
}

func (l *storeList) add(s *Store) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
}

// WriteAll has every IndexedDB Store write what it has queued at once, in
// transactions committed at once, without waiting for them: the page is
// going away (pagehide) or may be (hidden), and its event loop may not run
// again. Each transaction is started before WriteAll returns.
func WriteAll() {
	stores.mu.Lock()
	all := slices.Clone(stores.all)
	stores.mu.Unlock()
	for _, s := range all {
		s.hurry(writeFinal)
	}
}

// NewMemoryStore returns a Store that keeps state in memory only, for a page
// that asked for no persistence (loadRelay's storage: "memory"): nothing
// outlives the page, and nothing is reported as a fallback, since nothing
// failed.
func NewMemoryStore() *Store {
	s := newStore()
	s.mem = client.NewMemoryStore()
	return s
}

// Backend says where the Store keeps state: "indexeddb" or "memory".
func (s *Store) Backend() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem != nil {
		return "memory"
	}
	return "indexeddb"
}

// openDB opens the database, creating its object stores on first use.
func openDB(ctx context.Context, name string) (db js.Value, reason string, err error) {
	factory, err := global("indexedDB")
	if err == nil && (factory.IsUndefined() || factory.IsNull()) {
		err = errors.New("jsbridge: this page has no indexedDB")
	}
	if err != nil {
		return db, FallbackUnavailable, err
	}
	req, err := call(factory, "open", name, dbVersion)
	if err != nil { // e.g. a SecurityError in an opaque origin
		return db, FallbackUnavailable, err
	}
	events, stop, err := watch(req)
	if err != nil {
		return db, FallbackUnavailable, err
	}
	defer func() { stop() }()
	for {
		select {
		case ev := <-events:
			switch ev.kind {
			case doneOK:
				return ev.value, "", closeOnVersionChange(ev.value)
			case idbUpgrade:
				if err := createSchema(ev.value); err != nil {
					return db, FallbackFailed, err
				}
			case idbBlocked:
				go closeWhenOpen(events, stop)
				stop = func() {} // closeWhenOpen stops watching
				return db, FallbackBlocked, errors.New("jsbridge: another connection blocks opening IndexedDB")
			default:
				return db, FallbackFailed, domError(ev.value)
			}
		case <-ctx.Done():
			return db, FallbackFailed, ctx.Err()
		}
	}
}

// closeWhenOpen closes a database whose open was given up as blocked, if it
// opens after all, so that it does not block the next page in turn. (Blocked
// needs an older version held open elsewhere: it matters from schema
// version 2 on.)
func closeWhenOpen(events <-chan jsEvent, stop func()) {
	defer stop()
	for ev := range events {
		switch ev.kind {
		case idbUpgrade:
			_ = createSchema(ev.value) // a half-made schema would fail the next page
		case doneOK:
			_, _ = call(ev.value, "close")
			return
		case doneFailed:
			return
		}
	}
}

// closeOnVersionChange lets relay.js close the database when a newer page
// asks to upgrade it, instead of blocking that page.
func closeOnVersionChange(db js.Value) error {
	b, err := theBridge()
	if err != nil {
		return err
	}
	_, err = call(b, "watch", db, 0)
	return err
}

// createSchema runs inside the versionchange transaction of an open.
func createSchema(db js.Value) error {
	names, err := get(db, "objectStoreNames")
	if err != nil {
		return err
	}
	for _, store := range []string{storeState, storeChunks} {
		has, err := call(names, "contains", store)
		if err != nil {
			return err
		}
		if !jsBool(has) {
			if _, err := call(db, "createObjectStore", store); err != nil {
				return err
			}
		}
	}
	return nil
}

// Load implements client.Store.
func (s *Store) Load(ctx context.Context, k client.Key) (client.Saved, error) {
	if mem := s.settle(ctx); mem != nil {
		return mem.Load(ctx, k)
	}
	tx, err := s.tx("readonly", storeState)
	if err != nil {
		return client.Saved{}, s.readFailed(err)
	}
	states, _ := call(tx, "objectStore", storeState)
	req, err := call(states, "get", stateKey(k))
	if err != nil {
		return client.Saved{}, s.readFailed(err)
	}
	v, err := await(ctx, req)
	if err != nil {
		return client.Saved{}, s.readFailed(err)
	}
	rec := readState(v)
	rec.totalKnown = true
	s.mu.Lock()
	if !s.queued(k) { // else the queued write knows better, and reads the total itself
		s.known[k] = rec
	}
	s.mu.Unlock()
	return rec.saved, nil
}

// queued says whether a commit of k waits to be written. Called with s.mu
// held.
func (s *Store) queued(k client.Key) bool {
	for _, c := range s.pending {
		if c.key == k {
			return true
		}
	}
	return false
}

// Commit implements client.Store. It queues the write and returns; see Store.
func (s *Store) Commit(ctx context.Context, k client.Key, saved client.Saved, entries []client.Entry, keep int) error {
	c := commit{key: k, saved: saved, keep: keep}
	if keep > 0 {
		for _, e := range entries[max(0, len(entries)-keep):] {
			c.data = appendEntry(c.data, e)
			c.n++
		}
	}
	s.mu.Lock()
	if s.mem != nil {
		s.mu.Unlock()
		return s.mem.Commit(ctx, k, saved, entries, keep)
	}
	rec := s.known[k]
	newSession := rec.saved.Session != saved.Session
	rec.saved = saved
	s.known[k] = rec
	s.pending = append(s.pending, c)
	start := !s.writing
	s.writing = true
	s.mu.Unlock()
	if start {
		s.kick <- struct{}{} // never blocks: only the first commit of a window sends
	}
	if newSession {
		// The attachment id is what makes the stream reclaimable after a
		// crash: it does not wait for the window.
		s.hurry(writeNow)
	}
	return nil
}

// History implements client.Store.
func (s *Store) History(ctx context.Context, k client.Key) ([]client.Entry, error) {
	if mem := s.settle(ctx); mem != nil {
		return mem.History(ctx, k)
	}
	tx, err := s.tx("readonly", storeState, storeChunks)
	if err != nil {
		return nil, s.readFailed(err)
	}
	states, _ := call(tx, "objectStore", storeState)
	chunks, _ := call(tx, "objectStore", storeChunks)
	stateReq, err := call(states, "get", stateKey(k))
	if err != nil {
		return nil, s.readFailed(err)
	}
	chunksReq, err := call(chunks, "getAll", chunkRange(k, 0, maxChunkKey))
	if err != nil {
		return nil, s.readFailed(err)
	}
	v, err := await(ctx, stateReq)
	if err != nil {
		return nil, s.readFailed(err)
	}
	keep := readState(v).keep
	all, err := await(ctx, chunksReq)
	if err != nil {
		return nil, s.readFailed(err)
	}
	n := length(all)
	var out []client.Entry
	for i := range n {
		chunk, _ := index(all, i)
		buf := make([]byte, length(chunk)) // the entries' payloads point into it
		if _, err := copyBytesToGo(buf, chunk); err != nil {
			return nil, err
		}
		out = decodeEntries(out, buf)
	}
	if over := len(out) - keep; over > 0 {
		out = out[over:]
	}
	return out, nil
}

// Clear implements client.Store.
func (s *Store) Clear(ctx context.Context, k client.Key) error {
	if mem := s.settle(ctx); mem != nil {
		return mem.Clear(ctx, k)
	}
	tx, err := s.tx("readwrite", storeState, storeChunks)
	if err != nil {
		return err
	}
	states, _ := call(tx, "objectStore", storeState)
	chunks, _ := call(tx, "objectStore", storeChunks)
	if _, err := call(states, "delete", stateKey(k)); err != nil {
		return err
	}
	if _, err := call(chunks, "delete", chunkRange(k, 0, maxChunkKey)); err != nil {
		return err
	}
	if _, err := await(ctx, tx); err != nil {
		return err
	}
	s.mu.Lock()
	s.known[k] = stateRecord{totalKnown: true}
	s.mu.Unlock()
	return nil
}

// Flush waits until every Commit made so far is in IndexedDB (or the Store
// has fallen back to memory). Commit returns before its write lands; an
// attachment closed in this page flushes, so that the next attach of the
// stream, through any Store on the same database, starts from its cursor.
func (s *Store) Flush(ctx context.Context) error {
	s.settle(ctx)
	return ctx.Err()
}

// settle waits until every queued Commit is written, which it asks for
// now, and returns the memory store when the Store has fallen back to one.
func (s *Store) settle(ctx context.Context) *client.MemoryStore {
	s.mu.Lock()
	if !s.writing || s.mem != nil {
		mem := s.mem
		s.mu.Unlock()
		return mem
	}
	done := make(chan struct{})
	s.drained = append(s.drained, done)
	s.mu.Unlock()
	s.hurry(writeNow)
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem
}

// hurry asks the writer to write what is queued without waiting for the
// window to end (how: writeNow or writeFinal). It returns at once; the
// writer runs before control goes back to JavaScript.
func (s *Store) hurry(how int) {
	s.mu.Lock()
	if !s.writing || s.mem != nil {
		s.mu.Unlock()
		return
	}
	s.urgent = max(s.urgent, how)
	s.mu.Unlock()
	select {
	case s.now <- struct{}{}:
	default: // already woken
	}
}

// writer writes the queued commits: one window after the first commit of
// a batch, or sooner when hurried, in one transaction.
func (s *Store) writer() {
	for range s.kick {
		for s.writeOnce() {
		}
	}
}

// writeOnce waits out the window (unless hurried), writes what is queued and
// reports whether more was queued meanwhile.
func (s *Store) writeOnce() (more bool) {
	s.mu.Lock()
	urgent, window := s.urgent, s.window
	s.mu.Unlock()
	if urgent == 0 {
		s.wait(window)
	}
	s.mu.Lock()
	batch, final := s.pending, s.urgent == writeFinal
	s.pending, s.urgent = nil, 0
	s.mu.Unlock()
	err := s.write(context.Background(), batch, final)
	s.mu.Lock()
	if err != nil {
		s.fallBack(batch)
	}
	if s.mem == nil && len(s.pending) > 0 {
		s.mu.Unlock()
		return true
	}
	s.writing = false
	for _, d := range s.drained {
		close(d)
	}
	s.drained = nil
	s.mu.Unlock()
	if err != nil {
		s.report(reasonFor(err), err)
	}
	return false
}

// wait waits for the window to end, or for hurry. A window of 0 ends with
// the event-loop turn.
func (s *Store) wait(window time.Duration) {
	var end <-chan time.Time
	var turn chan struct{}
	if window > 0 {
		t := time.NewTimer(window)
		defer t.Stop()
		end = t.C
	} else if turn = make(chan struct{}, 1); nextTurn(turn) != nil {
		return
	}
	select {
	case <-end:
	case <-turn:
	case <-s.now:
	}
}

// write applies a batch in one readwrite transaction, which relay.js makes
// (write): per stream, the last state and the batch's entries as one
// chunk, trimmed to the newest keep. final: the page is going away, so the
// transaction is issued whole before this returns control to JavaScript and
// committed at once (trimming waits for the next write).
func (s *Store) write(ctx context.Context, batch []commit, final bool) error {
	b, err := theBridge()
	if err != nil {
		return err
	}
	streams := coalesce(batch)
	s.mu.Lock()
	meta := []byte{'['}
	var data []byte
	totals := make([]int, len(streams))
	for i, c := range streams {
		rec := s.known[c.key]
		totals[i] = -1
		if rec.totalKnown {
			totals[i] = rec.total
		}
		if i > 0 {
			meta = append(meta, ',')
		}
		meta = appendStream(meta, c, totals[i], len(data))
		data = append(data, c.data...)
	}
	s.mu.Unlock()
	meta = append(meta, ']')
	var chunk any // null when no stream has entries
	if len(data) > 0 {
		if chunk, err = uint8Array(data); err != nil {
			return err
		}
	}
	id, events, stop := newWait()
	defer stop()
	if _, err := call(b, "write", s.db, id, string(meta), chunk, final); err != nil {
		return err
	}
	select {
	case ev := <-events:
		if ev.kind != doneOK {
			return thrownError(ev.value)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	// What the transaction wrote is what this Store knows now.
	s.mu.Lock()
	for i, c := range streams {
		rec := s.known[c.key]
		rec.keep, rec.totalKnown = c.keep, totals[i] >= 0
		switch {
		case c.keep <= 0:
			rec.total, rec.totalKnown = 0, true
		case rec.totalKnown:
			rec.total = totals[i] + c.n
		}
		s.known[c.key] = rec
	}
	s.mu.Unlock()
	return nil
}

// appendStream adds one stream's part of a write to its JSON description
// (relay.js write): [url, instance, name, session, cursor, keep, total, n,
// offset, length]; total is -1 when relay.js must read it first.
func appendStream(b []byte, c commit, total, offset int) []byte {
	b = append(b, '[')
	for _, str := range []string{c.key.URL, c.key.Instance, c.key.Name, c.saved.Session} {
		b = appendJSONString(b, str)
		b = append(b, ',')
	}
	b = strconv.AppendUint(b, c.saved.Cursor, 10)
	for _, n := range []int{c.keep, total, c.n, offset, len(c.data)} {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(n), 10)
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string. s is UTF-8 (it came from
// JavaScript or passed librelay's identifier checks); only the quote, the
// backslash and control characters need escaping.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xF])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

// thrownError is what a failed write reports: a DOMException (an abort
// without one is an AbortError), or any other value JavaScript threw.
func thrownError(v js.Value) error {
	if v.IsNull() || v.IsUndefined() || isObject(v) {
		return domError(v)
	}
	return panicError(js.Error{Value: v})
}

// coalesce merges the commits of one stream, keeping the streams' order:
// the last state wins and the entries are concatenated, trimmed to keep.
func coalesce(batch []commit) []commit {
	var out []commit
	at := make(map[client.Key]int)
	for _, c := range batch {
		i, seen := at[c.key]
		if !seen {
			at[c.key] = len(out)
			out = append(out, c)
			continue
		}
		m := &out[i]
		m.saved, m.keep = c.saved, c.keep
		if c.keep <= 0 {
			m.data, m.n = nil, 0
			continue
		}
		m.data = append(m.data, c.data...)
		m.n += c.n
		if over := m.n - c.keep; over > 0 {
			m.data = skipEntries(m.data, over)
			m.n = c.keep
		}
	}
	return out
}

// fallBack moves the Store to memory after a failed write: the memory store
// starts from the state of every stream this Store has seen and replays the
// failed batch and anything queued since. Transcripts already in IndexedDB
// are not carried over. Called with s.mu held.
func (s *Store) fallBack(batch []commit) {
	if s.mem != nil {
		return
	}
	ctx := context.Background()
	mem := client.NewMemoryStore()
	for k, rec := range s.known {
		_ = mem.Commit(ctx, k, rec.saved, nil, 0)
	}
	for _, c := range append(batch, s.pending...) {
		_ = mem.Commit(ctx, c.key, c.saved, decodeEntries(nil, c.data), c.keep)
	}
	s.pending = nil
	s.mem = mem
}

// readFailed is a read that failed: the Store falls back to memory (so the
// next call works) and the read reports its error.
func (s *Store) readFailed(err error) error {
	s.mu.Lock()
	s.fallBack(nil)
	s.mu.Unlock()
	s.report(reasonFor(err), err)
	return err
}

func reasonFor(err error) string {
	if errName(err) == "QuotaExceededError" {
		return FallbackQuota
	}
	return FallbackFailed
}

// report tells onFallback, once.
func (s *Store) report(reason string, err error) {
	s.mu.Lock()
	first := !s.fellBack
	s.fellBack = true
	s.mu.Unlock()
	if first && s.onFallback != nil {
		s.onFallback(Fallback{Reason: reason, Err: err})
	}
}

// tx starts a transaction on the named object stores.
func (s *Store) tx(mode string, stores ...string) (js.Value, error) {
	names := make([]any, len(stores))
	for i, n := range stores {
		names[i] = n
	}
	return call(s.db, "transaction", names, mode)
}

// stateRecord is the value stored per stream in the state object store,
// and what a Store knows of it.
type stateRecord struct {
	saved client.Saved
	total int // transcript entries ever appended: the next chunk's start
	keep  int
	// totalKnown: total is what is stored (this Store read or wrote it
	// last), so a write need not read it first.
	totalKnown bool
}

func readState(v js.Value) stateRecord {
	if typeOf(v) != js.TypeObject {
		return stateRecord{}
	}
	field := func(p string) js.Value { f, _ := get(v, p); return f }
	return stateRecord{
		saved: client.Saved{Session: jsString(field("session")), Cursor: uint64(jsFloat(field("cursor")))},
		total: jsInt(field("total")),
		keep:  jsInt(field("keep")),
	}
}

func stateKey(k client.Key) []any { return []any{k.URL, k.Instance, k.Name} }

func chunkKey(k client.Key, start int) []any { return []any{k.URL, k.Instance, k.Name, start} }

// chunkRange is the key range of k's chunks starting in [from, to].
func chunkRange(k client.Key, from, to int) js.Value {
	return keyRange(chunkKey(k, from), chunkKey(k, to), false)
}

// chunkRangeOpen is the key range of k's chunks starting in [from, to).
func chunkRangeOpen(k client.Key, from, to int) js.Value {
	return keyRange(chunkKey(k, from), chunkKey(k, to), true)
}

func keyRange(lower, upper []any, upperOpen bool) js.Value {
	kr, err := global("IDBKeyRange")
	if err != nil {
		return js.Undefined()
	}
	r, err := call(kr, "bound", lower, upper, false, upperOpen)
	if err != nil {
		return js.Undefined()
	}
	return r
}

// uint8Array copies b into a new JavaScript Uint8Array.
func uint8Array(b []byte) (js.Value, error) {
	ctor, err := global("Uint8Array")
	if err != nil {
		return js.Undefined(), err
	}
	arr, err := newObject(ctor, len(b))
	if err != nil {
		return js.Undefined(), err
	}
	_, err = copyBytesToJS(arr, b)
	return arr, err
}

// appendEntry packs one transcript entry: a flags byte, the seq and the
// payload length as uvarints, then the payload.
func appendEntry(dst []byte, e client.Entry) []byte {
	var flags byte
	if e.Out {
		flags |= flagOutbound
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(e.Payload)))
	return append(dst, e.Payload...)
}

// nextEntry unpacks the entry at the start of b and returns the rest; ok is
// false at the end or on bytes that are not an entry.
func nextEntry(b []byte) (e client.Entry, rest []byte, ok bool) {
	if len(b) == 0 {
		return e, nil, false
	}
	e.Out = b[0]&flagOutbound != 0
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

// skipEntries drops the first n packed entries of b.
func skipEntries(b []byte, n int) []byte {
	for ; n > 0; n-- {
		_, rest, ok := nextEntry(b)
		if !ok {
			return nil
		}
		b = rest
	}
	return b
}
