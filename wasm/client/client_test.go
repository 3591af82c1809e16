//go:build !js

package client_test

import (
	"context"
	"slices"
	"testing"

	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// A prompt's streamed answer arrives whole, in order, each seq once, and the
// transcript holds both directions in the order they happened.
func TestStreamInOrder(t *testing.T) {
	s := newStack(t, nil, nil)
	c := clienttest.NewCollector()
	store := client.NewMemoryStore()
	a := s.attach(s.options(store, c))
	session := startChat(t, c, a)
	resp := call(t, c, a, 3, "session/prompt", promptParams(session, "count 500"))
	if string(resp.Result) != `{"stopReason":"end_turn"}` {
		t.Fatalf("prompt answered %s", resp.Result)
	}
	msgs := c.Snapshot()
	checkSeqs(t, msgs, 1, msgs[len(msgs)-1].Seq)
	checkCount(t, chunks(msgs), 500)
	waitCursor(t, a, msgs[len(msgs)-1].Seq)

	hist, err := a.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var in []uint64
	outs := 0
	for _, e := range hist {
		if e.Out {
			outs++
			continue
		}
		in = append(in, e.Seq)
	}
	var delivered []uint64
	for _, m := range msgs {
		delivered = append(delivered, m.Seq)
	}
	if !slices.Equal(in, delivered) {
		t.Fatalf("transcript seqs differ from delivered ones")
	}
	if outs != 3 || !hist[0].Out {
		t.Fatalf("transcript has %d sent entries (first sent: %v), want 3 and the initialize first", outs, hist[0].Out)
	}
}
