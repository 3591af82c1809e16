package relay

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// Attachment ids are 16 random bytes followed by the first 16 bytes of an
// HMAC-SHA256 over (credential digest, instance, random part), base64url
// without padding: 43 characters, 128 bits nobody can guess and 128 bits
// nobody can forge. Because the binding is in the id itself, any relay holding
// the key — this process after a restart, or another node — can tell whether
// an id was issued to this credential for this instance without having
// stored it.
const (
	idRandBytes = 16
	idMACBytes  = 16
	idKeyInfo   = "relaywasm/attachment-id/v1"
)

// idMinter mints and verifies attachment ids.
type idMinter struct{ key []byte }

// newIDMinter uses key, or derives one from the relay's Ed25519 seed with
// HKDF so that the signing key is never used for anything but signing.
func newIDMinter(key, seed []byte) (idMinter, error) {
	if len(key) > 0 {
		return idMinter{key: append([]byte(nil), key...)}, nil
	}
	k, err := hkdf.Key(sha256.New, seed, nil, idKeyInfo, sha256.Size)
	return idMinter{key: k}, err
}

// mint returns a fresh id bound to (cred, instance).
func (m idMinter) mint(cred credHash, instance string) string {
	var raw [idRandBytes + idMACBytes]byte
	rand.Read(raw[:idRandBytes])
	copy(raw[idRandBytes:], m.mac(raw[:idRandBytes], cred, instance))
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// verify reports whether id was minted (by any holder of the key) for
// exactly this credential and instance.
func (m idMinter) verify(id string, cred credHash, instance string) bool {
	var raw [idRandBytes + idMACBytes]byte
	if base64.RawURLEncoding.DecodedLen(len(id)) != len(raw) {
		return false
	}
	if n, err := base64.RawURLEncoding.Decode(raw[:], []byte(id)); err != nil || n != len(raw) {
		return false
	}
	return hmac.Equal(raw[idRandBytes:], m.mac(raw[:idRandBytes], cred, instance))
}

// mac covers the credential digest (fixed length), the instance (length
// prefixed) and the random part (fixed length), so no two inputs share bytes.
func (m idMinter) mac(random []byte, cred credHash, instance string) []byte {
	h := hmac.New(sha256.New, m.key)
	h.Write(cred[:])
	h.Write(binary.AppendUvarint(nil, uint64(len(instance))))
	h.Write([]byte(instance))
	h.Write(random)
	return h.Sum(nil)[:idMACBytes]
}

// digest is how an attachment id appears in logs: an id is a capability
// (whoever holds it, with the credential, can reclaim the attachment and
// replay its retained stream), so a log line carries only the first 48 bits
// of its SHA-256, in base64url: enough to follow one attachment through the
// logs, useless for reclaiming it.
func digest(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// tombstones remembers the newest ended ids, oldest forgotten first, so a
// hello naming an ended id gets a fresh one. After a restart they are gone
// and such an id is reclaimed; the runtime then no longer knows the session
// and answers the client's resume with cursor_evicted, which is equally safe.
type tombstones struct {
	max   int
	set   map[string]struct{}
	order []string
	head  int
}

func (t *tombstones) add(id string) {
	if t.set == nil {
		t.set = make(map[string]struct{})
	}
	if _, ok := t.set[id]; ok {
		return
	}
	if len(t.order) < t.max {
		t.order = append(t.order, id)
	} else {
		delete(t.set, t.order[t.head])
		t.order[t.head] = id
		t.head = (t.head + 1) % t.max
	}
	t.set[id] = struct{}{}
}

func (t *tombstones) has(id string) bool {
	_, ok := t.set[id]
	return ok
}
