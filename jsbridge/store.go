//go:build js && wasm

package jsbridge

import (
	"context"
	"encoding/binary"
	"errors"
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
	storeState   = "state"
	storeChunks  = "chunks"
	maxChunkKey  = 1 << 53 // above every start (a JavaScript number's exact range)
	flagOutbound = 1
)

// Store is a client.Store in the page's IndexedDB.
//
// Commit only queues: the writes of one event-loop turn, for every stream,
// go to IndexedDB as one readwrite transaction at the end of the turn, and
// while a transaction is in flight the next turn's commits wait and go in the
// next one. Within a transaction the state record and the transcript chunk of
// a stream are written together, so after any interruption the stored cursor
// and the stored transcript agree. Load, History and Clear first wait for the
// queued writes, so a Store reads its own writes.
//
// When IndexedDB is missing or fails, the Store keeps working in a
// client.MemoryStore, seeded with the state it knows, and reports a Fallback
// once. It never panics into a JavaScript callback.
type Store struct {
	db         js.Value
	onFallback func(Fallback)
	kick       chan struct{}

	mu       sync.Mutex
	mem      *client.MemoryStore // set once IndexedDB is given up
	pending  []commit            // queued, not yet in a transaction
	writing  bool                // a write is scheduled or running
	drained  []chan struct{}     // closed when nothing is queued or written
	known    map[client.Key]client.Saved
	fellBack bool
}

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
	s := &Store{onFallback: onFallback, kick: make(chan struct{}, 1), known: make(map[client.Key]client.Saved)}
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
	go s.writer()
	return s
}

// NewMemoryStore returns a Store that keeps state in memory only, for a page
// that asked for no persistence (loadRelay's storage: "memory"): nothing
// outlives the page, and nothing is reported as a fallback, since nothing
// failed.
func NewMemoryStore() *Store {
	return &Store{mem: client.NewMemoryStore(), kick: make(chan struct{}, 1), known: make(map[client.Key]client.Saved)}
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
	s.mu.Lock()
	s.known[k] = rec.saved
	s.mu.Unlock()
	return rec.saved, nil
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
	s.known[k] = saved
	s.pending = append(s.pending, c)
	schedule := !s.writing
	s.writing = true
	s.mu.Unlock()
	if schedule {
		return nextTurn(s.kick)
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
	delete(s.known, k)
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

// settle waits until every queued Commit is written, and returns the memory
// store when the Store has fallen back to one.
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
	select {
	case <-done:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem
}

// writer writes the queued commits, one transaction per wake-up.
func (s *Store) writer() {
	for range s.kick {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		s.mu.Unlock()
		err := s.write(context.Background(), batch)
		s.mu.Lock()
		if err != nil {
			s.fallBack(batch)
		}
		if s.mem != nil || len(s.pending) == 0 {
			s.writing = false
			for _, d := range s.drained {
				close(d)
			}
			s.drained = nil
			s.mu.Unlock()
			if err != nil {
				s.report(reasonFor(err), err)
			}
			if s.mem != nil {
				return
			}
			continue
		}
		s.mu.Unlock()
		if err := nextTurn(s.kick); err != nil {
			s.kick <- struct{}{}
		}
	}
}

// write applies a batch in one readwrite transaction: per stream, the last
// state and the batch's entries as one chunk, trimmed to the newest keep.
func (s *Store) write(ctx context.Context, batch []commit) error {
	tx, err := s.tx("readwrite", storeState, storeChunks)
	if err != nil {
		return err
	}
	done, stop, err := watch(tx)
	if err != nil {
		return err
	}
	defer stop()
	states, _ := call(tx, "objectStore", storeState)
	chunks, _ := call(tx, "objectStore", storeChunks)
	for _, c := range coalesce(batch) {
		if err := writeStream(ctx, states, chunks, c); err != nil {
			_, _ = call(tx, "abort")
			return err
		}
	}
	select {
	case ev := <-done:
		if ev.kind != doneOK {
			return domError(ev.value)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// writeStream issues one stream's requests inside the write transaction.
func writeStream(ctx context.Context, states, chunks js.Value, c commit) error {
	key := stateKey(c.key)
	req, err := call(states, "get", key)
	if err != nil {
		return err
	}
	v, err := await(ctx, req)
	if err != nil {
		return err
	}
	rec := readState(v)
	if c.keep <= 0 {
		if rec.total > 0 {
			if _, err := call(chunks, "delete", chunkRange(c.key, 0, maxChunkKey)); err != nil {
				return err
			}
		}
		rec.total = 0
	} else if c.n > 0 {
		arr, err := uint8Array(c.data)
		if err != nil {
			return err
		}
		if _, err := call(chunks, "put", arr, chunkKey(c.key, rec.total)); err != nil {
			return err
		}
		rec.total += c.n
		if err := trim(ctx, chunks, c.key, rec.total-c.keep); err != nil {
			return err
		}
	}
	rec.saved, rec.keep = c.saved, c.keep
	_, err = call(states, "put", rec.value(), key)
	return err
}

// trim deletes the chunks that hold only entries before index first. The
// chunk holding entry first starts at or before it; every chunk before that
// one ends before first.
func trim(ctx context.Context, chunks js.Value, k client.Key, first int) error {
	if first <= 0 {
		return nil
	}
	req, err := call(chunks, "openKeyCursor", chunkRange(k, 0, first), "prev")
	if err != nil {
		return err
	}
	cur, err := await(ctx, req)
	if err != nil || cur.IsNull() || cur.IsUndefined() {
		return err
	}
	key, _ := get(cur, "key")
	start, _ := index(key, 3)
	if from := jsInt(start); from > 0 {
		_, err = call(chunks, "delete", chunkRangeOpen(k, 0, from))
	}
	return err
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
	for k, saved := range s.known {
		_ = mem.Commit(ctx, k, saved, nil, 0)
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

// stateRecord is the value stored per stream in the state object store.
type stateRecord struct {
	saved client.Saved
	total int // transcript entries ever appended: the next chunk's start
	keep  int
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

func (r stateRecord) value() map[string]any {
	return map[string]any{
		"session": r.saved.Session,
		"cursor":  float64(r.saved.Cursor),
		"total":   r.total,
		"keep":    r.keep,
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
