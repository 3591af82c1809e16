package librelay

import "encoding/json"

// Resumption types are not control traffic: a relay routes them to the
// producer holding the content to replay. See Resume.
const (
	// TypeResume asks a session's producer to continue after a cursor; always a request, answered exactly once.
	TypeResume = "session.resume"
	// TypeResumed answers [TypeResume] and precedes the replayed frames.
	TypeResumed = "session.resumed"
)

// Chain-trigger types are cargo, not control traffic: a relay addresses a
// trigger to one instance and the machine answers with the result type.
const (
	// TypeChainTrigger asks the machine behind [Frame.Instance] to run a named task chain, payload [ChainTrigger]; relay→machine only.
	TypeChainTrigger = "chain_trigger"
	// TypeChainTriggerResult reports a chain trigger's outcome, payload [ChainTriggerResult]; machine→relay only, exactly one per [ChainTrigger.RequestID].
	TypeChainTriggerResult = "chain_trigger_result"
)

// Ask types carry a durable approval out of the machine and its verdict back.
// All three are notifications. The two the machine sends carry no session:
// they are addressed to the relay, never to a browser.
const (
	// TypeAskPublished announces an ask the machine has recorded; machine→relay only, sessionless.
	TypeAskPublished = "ask.published"
	// TypeAskResolved announces that an ask is no longer open; machine→relay only, sessionless.
	TypeAskResolved = "ask.resolved"
	// TypeAskVerdict delivers one settled verdict to the machine; relay→machine only.
	TypeAskVerdict = "ask.verdict"
)

// ChainTrigger.SessionMode values.
const (
	// ChainSessionNew runs the chain in a fresh session; the mode every machine implements.
	ChainSessionNew = "new"
	// ChainSessionReused asks the machine to reuse a session across triggers; unsupported machines refuse rather than silently downgrading to new.
	ChainSessionReused = "reused"
)

// ChainTriggerResult.Status values.
const (
	// ChainTriggerStatusOK: the chain ran to completion.
	ChainTriggerStatusOK = "ok"
	// ChainTriggerStatusError: the chain started and failed.
	ChainTriggerStatusError = "error"
	// ChainTriggerStatusRefused: the machine declined before any chain ran; a clean answer, not a run failure.
	ChainTriggerStatusRefused = "refused"
)

// Hello is the TypeHello payload: what the connector claims to be, before the
// relay has agreed to any of it.
type Hello struct {
	// ProtocolVersion is the highest envelope version the connector speaks.
	ProtocolVersion int `json:"protocol_version"`
	// Instance identifies the runtime; also set on the frame since routing must not require reading a payload.
	Instance string `json:"instance"`
	// Agent names the implementation and version, for operator diagnosis only; nothing may branch on it.
	Agent string `json:"agent,omitempty"`
	// Nonce is a fresh random challenge the relay signs into [Welcome.Signature]; generated per connection, never a secret, useful once.
	Nonce []byte `json:"nonce,omitempty"`
}

// Welcome is the TypeWelcome payload: the relay's acceptance.
type Welcome struct {
	// ProtocolVersion is the version the relay selected, min(peer, self); the connector must close if it's lower than it can speak.
	ProtocolVersion int `json:"protocol_version"`
	// Relay names the relay implementation and version, diagnostics only.
	Relay string `json:"relay,omitempty"`
	// Signature is Ed25519 over [SigningInput] of Hello.Nonce, ProtocolVersion and instance; omitempty since only a connector pinning a key requires it.
	Signature []byte `json:"sig,omitempty"`
	// RetryAfterSeconds hints how long to wait before redialling; a connector clamps it to its own bounds. Zero means the connector's own backoff applies.
	RetryAfterSeconds int `json:"retry_after,omitempty"`
}

// Resume is the TypeResume payload: continue a session's stream after a
// cursor. It is not relay control traffic: the producer replays, because it
// is the side still holding the content, so a relay routes it end to end like
// cargo. One direction only: a re-delivered command is a second command.
type Resume struct {
	// AfterSeq is the last [Frame.Seq] the requester saw; zero asks for the whole retained stream.
	AfterSeq uint64 `json:"after_seq"`
}

// Resumed is the TypeResumed payload: what the producer is about to send.
type Resumed struct {
	// FromSeq is the first [Frame.Seq] that follows; greater than Resume.AfterSeq+1 only when Evicted is set.
	FromSeq uint64 `json:"from_seq"`
	// Evicted reports the requested cursor is older than what the producer retains; a receiver seeing this must refetch state rather than append.
	Evicted bool `json:"evicted,omitempty"`
}

// Error is the TypeError payload.
type Error struct {
	// Code is machine-readable and stable; see the Code* constants.
	Code string `json:"code"`
	// Message is for humans and may change freely between versions.
	Message string `json:"message,omitempty"`
}

// ChainTrigger is the TypeChainTrigger payload: run this chain with this
// input.
type ChainTrigger struct {
	// RequestID correlates the [ChainTriggerResult] with this trigger; minted by the relay, echoed by the machine verbatim.
	RequestID string `json:"request_id"`
	// Chain names the chain file on the machine's own configuration path; what it resolves to is the machine's decision.
	Chain string `json:"chain"`
	// SessionMode is [ChainSessionNew] or [ChainSessionReused].
	SessionMode string `json:"session_mode"`
	// Input is the event envelope the chain receives, raw; the relay never parses it.
	Input json.RawMessage `json:"input"`
	// Policy optionally names the HITL policy envelope for the run; empty applies the machine's own default.
	Policy string `json:"policy,omitempty"`
}

// ChainTriggerResult is the TypeChainTriggerResult payload.
type ChainTriggerResult struct {
	// RequestID is [ChainTrigger.RequestID], echoed verbatim.
	RequestID string `json:"request_id"`
	// Status is one of the ChainTriggerStatus constants.
	Status string `json:"status"`
	// Error says why, for [ChainTriggerStatusError] and [ChainTriggerStatusRefused]; empty on ok.
	Error string `json:"error,omitempty"`
}
