//go:build js && wasm

package browser

import (
	"testing"

	"github.com/relaywasm/relaywasm/wasm/client"
)

// jsbridge's Store keeps client.Saved.PlaceOpen as it keeps the cursor: a
// reloaded page (a store reopened) reads whether a page before it left a
// place open, and so closes it when its own resume is answered. A record
// that does not carry it, as every record written before it was kept,
// reads as no place open.
func TestStoreKeepsPlaceOpen(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	place := client.Entry{Lost: &client.Eviction{FromSeq: 1}}
	in := received(0, 2)
	steps := []struct {
		saved   client.Saved
		entries []client.Entry
	}{
		{client.Saved{Session: "att-1", Cursor: 1}, []client.Entry{in[0]}},                                // written as before PlaceOpen was kept
		{client.Saved{Session: "att-1", Cursor: 2, PlaceOpen: true}, []client.Entry{place, in[1]}},        // the page goes away unanswered
		{client.Saved{Session: "att-1", Cursor: 2}, []client.Entry{{Lost: &client.Eviction{FromSeq: 2}}}}, // the next page's resume answered
	}
	for i, st := range steps {
		if err := s.Commit(ctx, testKey, st.saved, st.entries, 100); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil { // Commit only queues: stored for the store reopened too
			t.Fatal(err)
		}
		for what, store := range map[string]client.Store{"the store": s, "a store reopened": openStore(t, ctx, db)} {
			if got := mustLoad(t, ctx, store, testKey); got != st.saved {
				t.Fatalf("after commit %d, %s loads %+v, want %+v", i, what, got, st.saved)
			}
		}
	}
}
