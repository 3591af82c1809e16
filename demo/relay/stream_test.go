package relay_test

import (
	"strconv"
	"testing"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
)

// TestStreamCount1000 runs the whole path — raw client, relay, dev runtime,
// dev agent — and checks that a `count 1000` turn arrives complete, in order,
// with every frame of the session stamped 1, 2, 3 … with no gap.
func TestStreamCount1000(t *testing.T) {
	env := relaytest.Start(t, nil)
	env.StartRuntime(t, nil)
	b := env.Attach(t, "")
	sid, err := b.StartChat()
	if err != nil {
		t.Fatal(err)
	}
	chunks, seqs, stop, err := b.Prompt(3, sid, "count 1000")
	if err != nil {
		t.Fatal(err)
	}
	if stop != "end_turn" {
		t.Fatalf("stop reason %q, want end_turn", stop)
	}
	if len(chunks) != 1000 {
		t.Fatalf("got %d chunks, want 1000", len(chunks))
	}
	for i, c := range chunks {
		if want := strconv.Itoa(i+1) + "\n"; c != want {
			t.Fatalf("chunk %d is %q, want %q", i, c, want)
		}
	}
	// initialize and session/new answers took seq 1 and 2.
	for i, s := range seqs {
		if want := uint64(i + 3); s != want {
			t.Fatalf("message %d has seq %d, want %d", i, s, want)
		}
	}
}
