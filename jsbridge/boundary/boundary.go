// Package boundary defines, once, everything relay.js and relay.wasm share:
// the boundary's version, the record formats and their constants, the
// IndexedDB schema's names and the codes only relay.js raises. jsbridge uses
// these names; relay.js imports the same values from
// jsbridge/relayjs/boundary.js, which `go generate ./jsbridge/relayjs` writes
// from this package (JS) and tests/browser compares with what is committed.
//
// Change a value here and run go generate, and both sides agree again;
// change what a call or a record means and bump Version, so that a relay.js
// and a relay.wasm from different builds refuse each other (loadRelay
// rejects with wasm_load_failed) instead of misreading each other.
package boundary

import (
	"strconv"
	"strings"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// Version numbers the boundary: the calls, records and formats below. relay.js
// installs its bridge with it, and relay.wasm refuses a bridge whose version is
// not its own (and tells relay.js so).
const Version = 5

// BridgeGlobal is where relay.js installs its bridge object on globalThis.
// The name never changes: the version is a property of the object, so that
// two builds can always find each other and say that they differ.
const BridgeGlobal = "__relaywasm_bridge"

// Records of a flushed batch of inbound messages (relay.js records.js, read
// by jsbridge/frames.go), little-endian:
//
//	RecText     [0][u32 n][n bytes]                the message as it arrived
//	RecACP      [1][f64 ref][f64 seq][field × 5]   an acp.message relay.js parsed
//	RecACPText  [2][f64 ref][u32 n][n bytes]       one relay.js parsed, and its text
//	RecACPKeep  [3][as RecACP][u32 n][n bytes]     RecACP and its payload's text
//
// ref is the handle relay.js keeps the parsed message under; a field is
// [u32 n][n bytes], or [SameField] for the value of the socket's previous
// RecACP.
const (
	RecText    = 0
	RecACP     = 1
	RecACPText = 2
	RecACPKeep = 3
	SameField  = 0xffffffff
)

// EnvelopeFields are the string fields of a RecACP, in their order.
var EnvelopeFields = []string{"instance", "session", "id", "re", "trace"}

// How a socket hands its messages over (the mode of a dial).
const (
	ModeText      = 0 // every message as it arrived, for Go to parse
	ModeParse     = 1 // acp.messages parsed by relay.js, as RecACP where they can be
	ModeParseKeep = 2 // as ModeParse, with the payload's text too (a transcript keeps it)
	ModeParseHold = 3 // as ModeParse; relay.js holds the payload's text for the store (EntryHeld)
)

// Flags of a delivery entry [flags, ref] (jsbridge deliver, relay.js deliver).
const (
	DeliverReplay = 1 // meta.replay
	DeliverText   = 2 // ref is the place of [seq, payload] in the delivery's JSON text
)

// Socket events relay.js reports to Go.
const (
	SocketOpen  = 0
	SocketClose = 1
)

// Kinds of an asynchronous outcome relay.js reports to Go (done).
const (
	DoneOK     = 0 // success (value: the result)
	DoneFailed = 1 // failure (value: an Error, never another thrown value)
)

// The IndexedDB schema, owned by relay.js's store.js:
//
//	StoreState:  [url, instance, name]        -> {session, cursor, total, keep}
//	StoreChunks: [url, instance, name, start] -> packed entries: a Blob, or a Uint8Array
//
// A chunk holds the transcript entries of one write, packed by jsbridge
// (EntryOutbound and EntryLost are the flags of an entry kept); start counts the stream's
// entries since it began, so chunks sort in order and dropping the oldest is
// one range delete. A chunk is a Blob where the database takes Blobs and
// a Uint8Array where it does not (store.js); either holds the same bytes.
const (
	StoreDatabase = "relaywasm"
	StoreVersion  = 1
	StoreState    = "state"
	StoreChunks   = "chunks"
	EntryOutbound = 1
)

// EntryHeld marks an entry jsbridge commits without its payload:
// [flags][uvarint seq][uvarint ref] in place of the length and the bytes.
// ref is the message's (RecACP's) on a ModeParseHold socket, whose payload
// text relay.js holds (held.js); relay.js puts the text in, as the length
// and the bytes (entries.js), before the store keeps the entry, so no
// chunk holds the flag.
const EntryHeld = 2

// EntryLost marks an entry that is no message but a loss (client.Entry's
// Lost), in the transcript where the messages went missing: its seq is 0,
// and its payload [uvarint afterSeq][uvarint fromSeq][the reason, ASCII]
// the Eviction's fields. Its seq being 0 keeps a store that leaves out
// the messages it holds already (entries.js unrecorded) from taking it for
// one.
const EntryLost = 4

// StoreSpill begins the sessionStorage keys where a page that goes away
// leaves a copy of its last write (store.js), for the reloaded page to
// finish when the engine abandoned the IndexedDB transaction (WebKit aborts
// what is not committed when the page is torn down). sessionStorage is
// synchronous and survives a reload of the tab; IndexedDB stays the store.
const StoreSpill = "relaywasm.spill"

// DefaultCommitWindowMs is how long a store gathers commits before it
// writes them (jsbridge.Store).
const DefaultCommitWindowMs = 50

// A socket's messages are handed to Go once per event-loop turn, except
// during a flood: once a flush carried FloodBatch messages or more, the
// next waits until FloodMs after it ended (sockets.js says why). FloodMs
// is one display frame at 60 Hz.
const (
	FloodBatch = 8
	FloodMs    = 16
)

// Why a store keeps state in memory; onState reports it as info.reason.
const (
	FallbackUnavailable = "indexeddb_unavailable" // no indexedDB in this page, or open refused outright
	FallbackBlocked     = "indexeddb_blocked"     // another connection blocks the open, or any transaction for 10 s
	FallbackFailed      = "indexeddb_failed"      // an open, a read or a write failed
	FallbackQuota       = "quota_exceeded"        // the origin is out of storage
)

// FallbackReasons lists the reasons, in relay.d.ts's order.
var FallbackReasons = []string{FallbackUnavailable, FallbackBlocked, FallbackFailed, FallbackQuota}

// Error codes only relay.js raises. The others are the engine's
// (client.Codes); relay.js uses a few of those itself, and boundary.js has
// them from there.
const (
	CodeWasmLoadFailed = "wasm_load_failed" // relay.wasm could not be fetched or started, or is from another build
	CodeWasmExited     = "wasm_exited"      // relay.wasm stopped after it had started
	CodeStreamOpen     = "stream_open"      // att.stream(): the attachment has a stream open already
)

// Aborted is the message of a call an AbortSignal ended (code "canceled"),
// whether relay.js saw the signal first or Go's context ended with it:
// context.Canceled's own words ("context canceled") say nothing to a page.
const Aborted = "the operation was aborted"

// LoaderCodes are the codes only relay.js defines.
var LoaderCodes = []string{CodeWasmLoadFailed, CodeWasmExited, CodeStreamOpen}

// A constant of boundary.js: its name there and its value.
type constant struct {
	name  string
	value any // int, string or []string
}

// constants are what boundary.js exports, in order.
func constants() []constant {
	return []constant{
		{"VERSION", Version},
		{"BRIDGE_GLOBAL", BridgeGlobal},
		{"ACP_TYPE", librelay.TypeACPMessage},
		{"MAX_FRAME_BYTES", librelay.MaxFrameBytes},
		{"REC_TEXT", RecText}, {"REC_ACP", RecACP}, {"REC_ACP_TEXT", RecACPText}, {"REC_ACP_KEEP", RecACPKeep},
		{"SAME_FIELD", SameField},
		{"FIELDS", EnvelopeFields},
		{"MODE_TEXT", ModeText}, {"MODE_PARSE", ModeParse}, {"MODE_PARSE_KEEP", ModeParseKeep},
		{"MODE_PARSE_HOLD", ModeParseHold},
		{"DELIVER_REPLAY", DeliverReplay}, {"DELIVER_TEXT", DeliverText},
		{"SOCKET_OPEN", SocketOpen}, {"SOCKET_CLOSE", SocketClose},
		{"DONE_OK", DoneOK}, {"DONE_FAILED", DoneFailed},
		{"STORE_DATABASE", StoreDatabase}, {"STORE_VERSION", StoreVersion},
		{"STORE_STATE", StoreState}, {"STORE_CHUNKS", StoreChunks}, {"STORE_SPILL", StoreSpill},
		{"ENTRY_OUTBOUND", EntryOutbound}, {"ENTRY_HELD", EntryHeld}, {"ENTRY_LOST", EntryLost},
		{"DEFAULT_COMMIT_WINDOW_MS", DefaultCommitWindowMs},
		{"FLOOD_BATCH", FloodBatch}, {"FLOOD_MS", FloodMs},
		{"FALLBACK_UNAVAILABLE", FallbackUnavailable}, {"FALLBACK_BLOCKED", FallbackBlocked},
		{"FALLBACK_FAILED", FallbackFailed}, {"FALLBACK_QUOTA", FallbackQuota},
		{"CODE_WASM_LOAD_FAILED", CodeWasmLoadFailed}, {"CODE_WASM_EXITED", CodeWasmExited},
		{"CODE_STREAM_OPEN", CodeStreamOpen},
		{"CODE_CANCELED", client.CodeCanceled}, {"ABORTED", Aborted},
		{"CODE_BAD_OPTIONS", client.ErrBadOptions.Code()},
		{"CODE_BAD_PAYLOAD", client.ErrBadPayload.Code()}, {"CODE_BAD_CURSOR", client.ErrBadCursor.Code()},
		{"CODE_SUPERSEDED", client.ErrSuperseded.Code()},
		{"CODE_RUNTIME_GONE", client.ErrRuntimeGone.Code()},
		{"CODE_CLOSED", client.ErrClosed.Code()},
	}
}

// JS is the text of boundary.js, as go generate writes it.
func JS() string {
	var b strings.Builder
	b.WriteString("// Code generated by `go generate ./jsbridge/relayjs` from jsbridge/boundary; DO NOT EDIT.\n")
	b.WriteString("//\n// The constants relay.js shares with relay.wasm, defined in Go\n")
	b.WriteString("// (jsbridge/boundary, which says what each means).\n\n")
	for _, c := range constants() {
		b.WriteString("export const " + c.name + " = " + jsLiteral(c.value) + ";\n")
	}
	return b.String()
}

func jsLiteral(v any) string {
	switch v := v.(type) {
	case int:
		return strconv.Itoa(v)
	case string:
		return strconv.Quote(v) // the values are ASCII: a Go quote is a JS one
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = strconv.Quote(s)
		}
		return "Object.freeze([" + strings.Join(parts, ", ") + "])"
	}
	panic("boundary: a boundary constant of an unknown type")
}
