package client

import (
	"context"
	"sync"
)

// Key names one persisted stream: the relay it lives on, the runtime instance
// and the application's name for the stream. Two attachments with the same Key
// share a cursor, which is what lets a reloaded page pick up where it was.
type Key struct {
	URL      string
	Instance string
	Name     string
}

// Saved is what survives a reload: the attachment id to reclaim and the last
// seq the application handled on it, and whether the transcript holds a
// place (Entry.Lost) that neither an answer nor a not_resumed loss followed.
// A page that went away before its resume was answered leaves one; the next
// page's answered resume closes it (an answer recorded), or a not_resumed
// loss that page is told later would go there too, where nothing was lost.
// A Store keeps it as it keeps Cursor; one that does not reads false, as
// before it was kept.
type Saved struct {
	Session   string
	Cursor    uint64
	PlaceOpen bool
}

// Entry is one line of the local transcript. Received entries carry the seq
// they arrived with (0 for an unsequenced frame); sent entries are marked Out
// and have no seq, because the runtime never replays what a client sent.
// An entry with Lost set is no message but a loss, in the place where
// messages went missing, as OnEvicted told it: Out is false, Seq 0 and
// Payload empty then.
type Entry struct {
	Out     bool
	Seq     uint64
	Payload []byte
	// Ref is the received message's Message.Ref (0: none). A Store whose
	// transport keeps payloads for it (jsbridge's, in relay.js) finds an
	// empty Payload by it; any other Store ignores it.
	Ref uint64
	// Lost is the loss this entry records, nil for a message. A loss is
	// recorded only when a transcript is kept, after the messages
	// delivered before it was told, and counts toward History's keep like
	// a message.
	//
	// A Store keeps two more kinds of entry, marks, which
	// Attachment.History leaves out: Lost with an empty Reason, told apart
	// by FromSeq. A place (FromSeq 1) is where a connection took the
	// stream up again. A not_resumed loss is told, and committed, after
	// what its connection delivered while the resume's answer was awaited;
	// it belongs in that place, and PlaceLosses puts it there. An answer
	// (FromSeq 2) is a resume the runtime answered, after places recorded
	// before it: those lost nothing a resume does not tell, and a page that
	// went away before its resume was answered or given up on leaves its
	// place open for the next one's not_resumed. A place with FromSeq 0 is
	// one recorded before answers were: PlaceLosses reads it as it did
	// then. Marks count toward History's keep as messages do, and are
	// few: a place is committed only once its connection delivered or
	// sent something before the resume's answer, or it got none; an
	// answer only after a place its attachment committed.
	Lost *Eviction
}

// The kinds of mark (Entry.Lost with an empty Reason), by FromSeq.
const (
	markOldPlace = 0 // a place recorded before answers were
	markPlace    = 1 // where a connection took the stream up again
	markAnswered = 2 // a resume answered: the places before it lost nothing untold
)

func isMark(e *Entry) bool     { return e.Lost != nil && e.Lost.Reason == "" }
func isPlace(e *Entry) bool    { return isMark(e) && e.Lost.FromSeq != markAnswered }
func isAnswered(e *Entry) bool { return isMark(e) && e.Lost.FromSeq == markAnswered }

// PlaceLosses returns a transcript as a Store's History returns it (as
// committed) as Attachment.History does: each not_resumed loss moved back
// into every place still open before it, and the marks left out. A place is
// open until an answer, or a not_resumed loss, follows it: a page that
// opened a connection again and went away before its resume was answered or
// given up on lost, against a runtime that does not resume, what was sent
// while it was away, as the next page's not_resumed says. A place recorded
// before answers were (FromSeq 0) is read as it was then: one another place
// follows took no loss. A not_resumed loss with no place open stays where it
// was told (its place was trimmed away). It works in h's array. A Store
// need not know of it: whoever reads one does.
func PlaceLosses(h []Entry) []Entry {
	out := h[:0]
	open := 0 // in out: where the places still open begin
	old := -1 // in out: the open place of the old kind, if any
	for _, e := range h {
		switch {
		case e.Lost == nil:
		case isAnswered(&e):
			out, old = dropPlaces(out, open), -1
			open = len(out)
			continue
		case isPlace(&e):
			if old >= 0 {
				out = append(out[:old], out[old+1:]...) // another place follows: no loss came for it
				old = -1
			}
			if e.Lost.FromSeq == markOldPlace {
				old = len(out)
			}
		case e.Lost.Reason == EvictedNotResumed:
			filled := fillPlaces(out[open:], e.Lost)
			open, old = len(out), -1
			if filled {
				continue
			}
		}
		out = append(out, e)
	}
	return dropPlaces(out, open)
}

// dropPlaces removes the places from out[from:]: no loss came for them.
func dropPlaces(out []Entry, from int) []Entry {
	kept := from
	for _, e := range out[from:] {
		if !isPlace(&e) {
			out[kept] = e
			kept++
		}
	}
	return out[:kept]
}

// fillPlaces puts the loss lost in each place of h, and reports whether
// there was one.
func fillPlaces(h []Entry, lost *Eviction) bool {
	filled := false
	for i := range h {
		if isPlace(&h[i]) {
			l := *lost
			h[i] = Entry{Lost: &l}
			filled = true
		}
	}
	return filled
}

// Store keeps the cursor, and optionally the transcript, of each stream.
//
// Commit is the only write on the hot path and the engine calls it once per
// batch of inbound frames, not once per frame. It applies the new state and
// the appended entries atomically: after any interruption, the stored cursor
// and the stored transcript agree, so the transcript plus what a resume
// replays holds every frame exactly once. A Store may make a Commit durable
// after it returns, but must apply commits in the order they were made.
type Store interface {
	// Load returns the saved state of k, or the zero Saved if nothing is stored.
	Load(ctx context.Context, k Key) (Saved, error)
	// Commit records s and appends entries to k's transcript, keeping at most
	// keep entries (the newest); keep <= 0 keeps no transcript.
	Commit(ctx context.Context, k Key, s Saved, entries []Entry, keep int) error
	// History returns k's transcript, oldest first, as committed: a reader
	// puts its losses in place with PlaceLosses (Attachment.History does).
	History(ctx context.Context, k Key) ([]Entry, error)
	// Clear forgets everything stored for k.
	Clear(ctx context.Context, k Key) error
}

// MemoryStore is a Store in process memory: the default, and what the browser
// falls back to when IndexedDB is unavailable. It survives the loss of an
// Attachment (a new one with the same Key resumes), not the loss of the process.
//
// The zero value is an empty MemoryStore ready to use; a MemoryStore must
// not be copied after first use.
type MemoryStore struct {
	mu      sync.Mutex
	streams map[Key]*memoryStream
}

type memoryStream struct {
	saved      Saved
	transcript []Entry
}

// NewMemoryStore returns an empty MemoryStore (as new(MemoryStore) does).
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{streams: make(map[Key]*memoryStream)}
}

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, k Key) (Saved, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.streams[k]; s != nil {
		return s.saved, nil
	}
	return Saved{}, nil
}

// Commit implements Store. Payloads are copied: the engine reuses its buffers.
func (m *MemoryStore) Commit(_ context.Context, k Key, s Saved, entries []Entry, keep int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.streams[k]
	if st == nil {
		if m.streams == nil {
			m.streams = make(map[Key]*memoryStream)
		}
		st = &memoryStream{}
		m.streams[k] = st
	}
	st.saved = s
	if keep <= 0 {
		st.transcript = nil
		return nil
	}
	for _, e := range entries {
		e.Payload = append([]byte(nil), e.Payload...)
		if e.Lost != nil {
			lost := *e.Lost
			e.Lost = &lost
		}
		st.transcript = append(st.transcript, e)
	}
	if over := len(st.transcript) - keep; over > 0 {
		st.transcript = append(st.transcript[:0:0], st.transcript[over:]...)
	}
	return nil
}

// History implements Store.
func (m *MemoryStore) History(_ context.Context, k Key) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.streams[k]
	if st == nil {
		return nil, nil
	}
	return append([]Entry(nil), st.transcript...), nil
}

// Clear implements Store.
func (m *MemoryStore) Clear(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.streams, k)
	return nil
}
