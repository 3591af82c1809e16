package relay

import (
	"crypto/ed25519"
	"testing"

	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// A hello whose welcome cannot be queued (its socket closing meanwhile)
// leaves no attachment record behind. The record it was given had no
// socket and no grace timer, so nothing ever removed it, and each such
// hello took one of the instance's AttachmentsPerInstance for good.
func TestUnwelcomedHelloLeavesNoAttachment(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := &browserConn{r: r, cred: hashCredential("client")}
	if code := r.attach(s, "demo", "", func(string) bool { return false }); code != relayleg.CodeShuttingDown {
		t.Fatalf("attach refused with %q, want %q", code, relayleg.CodeShuttingDown)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.attachments) != 0 || r.perInstance["demo"] != 0 {
		t.Fatalf("%d attachment records left, %d counted for the instance; want none", len(r.attachments), r.perInstance["demo"])
	}
}
