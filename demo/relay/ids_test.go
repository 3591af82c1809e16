package relay

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
)

func minter(t *testing.T, seed []byte) idMinter {
	m, err := newIDMinter(nil, seed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An id verifies for the credential and instance it was minted for, on any
// minter derived from the same key, and for nothing else.
func TestAttachmentIDBinding(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	m := minter(t, seed)
	alice, bob := hashCredential("alice"), hashCredential("bob")
	id := m.mint(alice, "demo")
	if len(id) != 43 {
		t.Fatalf("id %q is %d characters, want 43 (256 bits)", id, len(id))
	}
	if !m.verify(id, alice, "demo") || !minter(t, seed).verify(id, alice, "demo") {
		t.Fatal("an id does not verify for its own credential and instance")
	}
	other := make([]byte, ed25519.SeedSize)
	rand.Read(other)
	tampered := []byte(id)
	tampered[5] ^= 1
	for name, ok := range map[string]bool{
		"other credential": m.verify(id, bob, "demo"),
		"other instance":   m.verify(id, alice, "demo2"),
		"other key":        minter(t, other).verify(id, alice, "demo"),
		"tampered":         m.verify(string(tampered), alice, "demo"),
		"truncated":        m.verify(id[:42], alice, "demo"),
		"not base64":       m.verify("!"+id[1:], alice, "demo"),
	} {
		if ok {
			t.Fatalf("%s: id verified", name)
		}
	}
	if m.mint(alice, "demo") == id {
		t.Fatal("two mints gave the same id")
	}
}

// A configured attachment key wins over the derived one, so relays with
// different signing keys can share ids.
func TestAttachmentKeyConfigured(t *testing.T) {
	a, _ := newIDMinter([]byte("shared-attachment-key-0123456789"), []byte("seed-one-seed-one-seed-one-seed!"))
	b, _ := newIDMinter([]byte("shared-attachment-key-0123456789"), []byte("seed-two-seed-two-seed-two-seed!"))
	h := hashCredential("c")
	if !b.verify(a.mint(h, "i"), h, "i") {
		t.Fatal("an id did not verify on a relay sharing the attachment key")
	}
}

// Tombstones remember the newest ended ids up to their bound.
func TestTombstones(t *testing.T) {
	ts := tombstones{max: 2}
	ts.add("a")
	ts.add("b")
	ts.add("a")
	ts.add("c")
	if ts.has("a") || !ts.has("b") || !ts.has("c") || len(ts.set) != 2 {
		t.Fatalf("tombstones hold %v", ts.set)
	}
}

// Removing a replaced endpoint leaves its successor in place.
func TestTableRemoveOnlyCurrent(t *testing.T) {
	tb := NewMemTable()
	old, cur := &browserConn{}, &browserConn{}
	tb.SetAttachment("i", "a", old)
	if replaced := tb.SetAttachment("i", "a", cur); replaced != old {
		t.Fatal("SetAttachment did not return the endpoint it replaced")
	}
	if tb.RemoveAttachment("i", "a", old) || tb.Attachment("i", "a") != cur {
		t.Fatal("removing a replaced endpoint removed its successor")
	}
	if tb.Attachment("i", "") != nil {
		t.Fatal("an empty session routed somewhere")
	}
}
