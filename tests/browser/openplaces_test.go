//go:build js && wasm

package browser

import (
	"reflect"
	"testing"

	"github.com/relaywasm/relaywasm/wasm/client"
)

// jsbridge's Store keeps the marks the engine records besides messages and
// losses (client.Entry.Lost with an empty Reason, told apart by FromSeq: a
// place, an answer), as they were committed, for a store reopened (a
// reloaded page) too: read through PlaceLosses, a not_resumed loss fills
// every place open before it, one a page left when it went away before its
// resume's wait ended among them, and not one an answer closed.
func TestStoreKeepsOpenPlaces(t *testing.T) {
	ctx := testContext(t)
	db := database(t)
	s := openStore(t, ctx, db)
	place := client.Entry{Lost: &client.Eviction{FromSeq: 1}}
	answered := client.Entry{Lost: &client.Eviction{FromSeq: 2}}
	notResumed := client.Entry{Lost: &client.Eviction{Reason: client.EvictedNotResumed}}
	in := received(0, 6)
	commits := [][]client.Entry{
		{in[0], place, in[1]},           // answered later
		{answered, in[2], place, in[3]}, // the page went away unanswered
		{place, in[4]},
		{notResumed, in[5]},
	}
	for i, entries := range commits {
		if err := s.Commit(ctx, testKey, client.Saved{Session: "att-1", Cursor: uint64(i + 1)}, entries, 100); err != nil {
			t.Fatal(err)
		}
	}
	want := []client.Entry{in[0], in[1], in[2], notResumed, in[3], notResumed, in[4], in[5]}
	for what, store := range map[string]client.Store{"the store": s, "a store reopened": openStore(t, ctx, db)} {
		if got := client.PlaceLosses(mustHistory(t, ctx, store, testKey)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s's History = %s, want %s", what, describeLosses(got), describeLosses(want))
		}
	}
}
