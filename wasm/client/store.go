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
// seq the application handled on it.
type Saved struct {
	Session string
	Cursor  uint64
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
	// A Store keeps one more kind of entry, which Attachment.History
	// leaves out: Lost with an empty Reason is the place where a connection
	// took the stream up again. A not_resumed loss is told, and committed,
	// after what its connection delivered while the resume's answer was
	// awaited; it belongs in that place, and PlaceLosses puts it there.
	Lost *Eviction
}

// PlaceLosses returns a transcript as a Store's History returns it (as
// committed) as Attachment.History does: each not_resumed loss moved back
// into the place recorded where its connection opened (the last one before
// it, if not taken by another loss), and the places left out. It works in
// h's array. A Store need not know of it: whoever reads one does.
func PlaceLosses(h []Entry) []Entry {
	out := h[:0]
	place := -1 // in out: the last place not yet taken
	for _, e := range h {
		switch {
		case e.Lost == nil:
		case e.Lost.Reason == "":
			if place >= 0 {
				out = append(out[:place], out[place+1:]...) // no loss came for it
			}
			place = len(out)
		case e.Lost.Reason == EvictedNotResumed && place >= 0:
			out[place] = e
			place = -1
			continue
		}
		out = append(out, e)
	}
	if place >= 0 {
		out = append(out[:place], out[place+1:]...)
	}
	return out
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
