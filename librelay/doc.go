// Package librelay defines the wire contract between a runtime and a relay:
// the Frame envelope, its NDJSON codec (Reader, Writer), and the relay-level
// control messages. A runtime dials out and holds the connection; nothing here
// listens, and nothing here knows a hostname — the endpoint and the relay's
// public key are configuration.
//
// The package sits at the module root rather than under internal/ because a
// relay implementation is a separate module and cannot import internal/. Both
// ends must compile against one definition of the envelope; two definitions
// that drift is the failure this placement prevents.
//
// # The envelope
//
// A frame carries routing (Frame.Instance, Frame.Session), a discriminator
// (Frame.Type), correlation (Frame.ID / Frame.ReplyTo), a cursor (Frame.Seq),
// a trace key (Frame.Trace) and an opaque Frame.Payload. The payload is raw
// JSON precisely so a relay can route a frame without parsing what is inside
// it; a relay that unmarshals ACP has taken on a dependency the design says
// it does not have. There is no encryption layer here: TLS provides
// confidentiality and the envelope is plain readable JSON.
//
// # One type space
//
// Control and tunnelled traffic share Frame.Type. A receiver's read loop makes
// exactly one decision per frame: ControlPrefix means "for me", anything else
// means "route it". Two fields could disagree, and every disagreement is a
// case somebody has to invent behaviour for.
//
// # Compatibility
//
// Unknown is never fatal, in both directions. Unknown fields are ignored, so
// the envelope evolves by addition only and a field may never change meaning.
// An unknown non-control type is routed on (instance, session). An unknown
// control type is answered by Unsupported when it is a request and dropped
// when it is not: a request always gets exactly one reply, so a newer peer
// fails fast against an older one, and a response or notification never
// induces a reply, so two peers cannot ping-pong errors.
//
// "Ignored" holds for an endpoint. It does NOT hold for a relay that decodes
// and re-encodes a frame to forward it: there an unknown field is destroyed,
// silently. A relay must be built against a version of this package at least
// as new as the endpoints it carries.
//
// The protocol version is negotiated once in Hello / Welcome and is not a
// per-frame field: it cannot change mid-connection, and a framing change
// severe enough to need it would make the frame unparseable first.
//
// # Authentication
//
// The instance proves itself to the relay with a bearer credential on the
// transport's upgrade request — never in a frame, so nothing here handles it.
// The relay proves itself to the instance inside the handshake: Hello carries
// a fresh Hello.Nonce and Welcome answers with Welcome.Signature, checked by
// VerifyWelcome against the key the instance stored when it paired. Both ends
// compute the signed bytes with SigningInput.
//
// The nonce and the signature are []byte members, so in JSON each travels as
// padded standard base64, as encoding/json writes it and as contenox's
// librelay sends it: "nonce":"ICEi…Pz8=", "sig":"…==". SigningInput spells
// the nonce differently, as unpadded base64url, inside the signed bytes
// only; a peer signs and verifies over the decoded nonce, never over the
// JSON text. Spec 001 says SigningInput's nonce is "the same text it travels
// as in JSON", which contradicts its own Hello and Welcome definitions; this
// package follows the definitions, which is what the shipped endpoints do.
// A Hello or Welcome spelling either value as base64url does not decode
// (ErrMalformedFrame), as with encoding/json.
//
// Test vectors, for another implementation to check itself against (also in
// testdata/signing_vectors.json and ExampleSignWelcome): the Ed25519 key from
// the 32-byte seed 00 01 02 … 1f, nonce 20 21 22 … 3f (32 bytes), version 1,
// instance "inst-1". The public key, SigningInput and signature are listed
// there in full.
//
// # Resumption
//
// A dropped connection costs latency, never content. Frame.Seq is the
// producer's per-session cursor; on reconnect the receiver sends Resume with
// the last value it saw and the producer continues after it (SSE's model: one
// cursor per connection, not an acknowledgement per message). Resumption is
// cargo, not control: the producer holds the content, so TypeResume routes end
// to end.
//
// # Direction
//
// Most types travel both ways. Five do not, and a relay enforces it, because
// the machine acts on them by type alone: RelayToMachineOnly is true of
// TypeChainTrigger and TypeAskVerdict, which the relay originates and must
// never forward from a browser; MachineToRelayOnly is true of
// TypeChainTriggerResult, TypeAskPublished and TypeAskResolved, which are
// addressed to the relay itself (the two ask types carry no session) and
// must never reach a browser.
//
// # Framing
//
// NDJSON, the framing ACP uses. The payload is already a JSON value, so a
// connector splices an ACP line into a frame with a byte copy and no
// re-encode. Writer compacts the payload, which is what makes newline
// delimiting safe: a raw newline between JSON tokens in a caller's payload
// would otherwise split one frame into two.
//
// MaxFrameBytes bounds a line, its newline included: the longest frame is
// MaxFrameBytes-1 bytes of JSON and its LF. Reader refuses a longer line
// (ErrFrameTooLarge) and Writer and AppendFrame never produce one, so a frame
// written here is never one a Reader refuses. A last line without a newline
// is a truncated frame (io.ErrUnexpectedEOF), and a line of only whitespace
// (Unicode whitespace, as bytes.TrimSpace has it) is skipped.
//
// # Agreement with the reference
//
// This package reads and writes exactly what contenox v1.0.0's librelay
// reads and writes, because a relay built on it sits between endpoints built
// on that one: the same lines are frames, the same frames are valid, the same
// frames encode to the same bytes, and the same key spellings parse. Its
// Validate refuses C0 controls and DEL in identifiers, not C1; its Reader
// decodes invalid UTF-8 in a string to U+FFFD, as encoding/json does, so only
// a frame built in-process can fail with ErrNotUTF8. Two differences are
// deliberate and only ever stricter on the writing side: AppendFrame refuses
// a payload nested so deep that the frame around it passes encoding/json's
// nesting limit (the reference writes it and then cannot read it back), and
// where the reference's Validate may report any one of several bad
// identifiers, this one reports the first in wire order.
//
// # Additions for the browser module
//
// Beyond the shared contract this package adds what a WebAssembly client
// needs to stay small and fast, without changing the wire format:
//
//   - AppendFrame and ParseFrame encode and decode one frame per message, for
//     transports that frame messages themselves (one WebSocket text message
//     per frame). Writer and Reader are built on them.
//   - The envelope and the payloads (Hello, Welcome, Resume, Resumed, Error,
//     ChainTrigger, ChainTriggerResult, AskPublished, AskResolved,
//     AskVerdict) are encoded and decoded by hand, with no reflection:
//     their MarshalJSON and UnmarshalJSON methods produce and accept exactly
//     what encoding/json does for those types. A program that uses only
//     these, ParseFrame, AppendFrame and the signature functions links
//     neither encoding/json's encoder nor its decoder, nor fmt. Only
//     WithPayload and DecodePayload, which take arbitrary Go values, use
//     encoding/json.
//   - ErrMalformedFrame names a frame that is not well-formed JSON or has a
//     member of the wrong type.
//   - RelayToMachineOnly and MachineToRelayOnly state the direction rules.
//   - The JSON scanner does not recurse: a frame nested to encoding/json's
//     limit of 10000 levels costs a reader's goroutine no stack.
package librelay
