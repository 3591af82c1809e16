package librelay

import (
	"encoding/json"
	"time"
)

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
	// TypeAskPublished announces an ask the machine has recorded, payload [AskPublished]; machine→relay only, sessionless.
	TypeAskPublished = "ask.published"
	// TypeAskResolved announces that an ask is no longer open, payload [AskResolved]; machine→relay only, sessionless.
	TypeAskResolved = "ask.resolved"
	// TypeAskVerdict delivers one settled verdict to the machine, payload [AskVerdict]; relay→machine only.
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
	// ChainTriggerStatusAwaitingHuman: the chain is parked on an ask a human must settle; its verdict arrives as [TypeAskVerdict], and this is not the run's outcome.
	ChainTriggerStatusAwaitingHuman = "awaiting_human"
)

// AskResolved.Reason values.
const (
	// AskResolvedAnswered: a verdict was recorded against the ask.
	AskResolvedAnswered = "answered"
	// AskResolvedExpired: the ask reached its deadline and its on-timeout action applied.
	AskResolvedExpired = "expired"
	// AskResolvedSuperseded: the ask was closed without a verdict because its run is gone.
	AskResolvedSuperseded = "superseded"
)

// AskVerdict.Decision values.
const (
	// AskDecisionAllow permits the gated call.
	AskDecisionAllow = "allow"
	// AskDecisionDeny refuses the gated call.
	AskDecisionDeny = "deny"
	// AskDecisionAnswer carries text in [AskVerdict.Answer] answering a question, rather than gating a call.
	AskDecisionAnswer = "answer"
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
	// In JSON it is padded standard base64, as encoding/json writes a []byte (and as contenox's librelay sends it);
	// [SigningInput] re-spells the same bytes as unpadded base64url inside the signed bytes only, so a peer signs
	// or verifies over the decoded bytes, never over this text. A nonce spelled in base64url does not decode.
	Nonce []byte `json:"nonce,omitempty"`
}

// Welcome is the TypeWelcome payload: the relay's acceptance.
type Welcome struct {
	// ProtocolVersion is the version the relay selected, min(peer, self); the connector must close if it's lower than it can speak.
	ProtocolVersion int `json:"protocol_version"`
	// Relay names the relay implementation and version, diagnostics only.
	Relay string `json:"relay,omitempty"`
	// Signature is Ed25519 over [SigningInput] of Hello.Nonce, ProtocolVersion and instance; omitempty since only a connector pinning a key requires it.
	// In JSON it is padded standard base64, as encoding/json writes a []byte (and as contenox's librelay sends it),
	// not base64url: a welcome whose sig is spelled otherwise does not decode (see the package's Authentication section).
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
	// AgentName optionally names the agent the chain runs as; empty leaves the choice to the machine.
	AgentName string `json:"agent_name,omitempty"`
	// SessionMode is [ChainSessionNew] or [ChainSessionReused].
	SessionMode string `json:"session_mode"`
	// SessionName optionally names the session a [ChainSessionReused] trigger reuses, so several triggers share one; empty lets the machine pick.
	SessionName string `json:"session_name,omitempty"`
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

// AskPublished is the [TypeAskPublished] payload: what a human needs to decide
// an ask, and never the gated call's arguments (only ArgsSummary, written for
// a person). The relay holds it until an [AskResolved] with the same AskID.
type AskPublished struct {
	// AskID names the ask; an [AskVerdict] and the [AskResolved] that closes it carry it back verbatim.
	AskID string `json:"ask_id"`
	// SessionID is the machine's session the asking run belongs to; machine-side text, not a relay [Frame.Session].
	SessionID string `json:"session_id,omitempty"`
	// MissionID is the mission the run serves, when it serves one.
	MissionID string `json:"mission_id,omitempty"`
	// AgentName names the agent whose call is gated.
	AgentName string `json:"agent_name,omitempty"`
	// ToolsName names the tool set the gated call belongs to.
	ToolsName string `json:"tools_name,omitempty"`
	// ToolName names the gated call itself.
	ToolName string `json:"tool_name,omitempty"`
	// PolicyName names the HITL policy that asked.
	PolicyName string `json:"policy_name,omitempty"`
	// MatchedRule is the index of the policy rule that matched; nil when no single rule did (zero is a rule).
	MatchedRule *int `json:"matched_rule,omitempty"`
	// ArgsSummary describes the call's arguments for a person; the arguments themselves never leave the machine.
	ArgsSummary string `json:"args_summary,omitempty"`
	// ExpiresAt is when the ask times out and its on-timeout action applies; zero means it does not expire.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// AskResolved is the [TypeAskResolved] payload: an ask that is no longer open,
// and why.
type AskResolved struct {
	// AskID is [AskPublished.AskID].
	AskID string `json:"ask_id"`
	// Reason is one of the AskResolved constants.
	Reason string `json:"reason"`
}

// AskVerdict is the [TypeAskVerdict] payload: one settled decision for an
// ask. It says who decided (DecidedBy) but carries nothing about who was
// entitled to: that is the relay's to check before it sends one, and the
// machine acts on the verdict as given.
type AskVerdict struct {
	// AskID is [AskPublished.AskID].
	AskID string `json:"ask_id"`
	// Decision is one of the AskDecision constants.
	Decision string `json:"decision"`
	// Answer is the text an [AskDecisionAnswer] carries.
	Answer string `json:"answer,omitempty"`
	// Guidance is optional text for the agent, with an allow or a deny.
	Guidance string `json:"guidance,omitempty"`
	// DecidedBy names who decided, for the record; never authorized on.
	DecidedBy string `json:"decided_by,omitempty"`
	// DecidedAt is when the decision was made; zero when not recorded.
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// RelayToMachineOnly reports whether a frame of type msgType travels from the
// relay to a machine and never the other way or from a browser: the relay
// originates it ([TypeChainTrigger], [TypeAskVerdict]) and the machine acts
// on it by type alone, so a relay must never forward one a browser sent. It
// is false for every type this build does not know.
func RelayToMachineOnly(msgType string) bool {
	return msgType == TypeChainTrigger || msgType == TypeAskVerdict
}

// MachineToRelayOnly reports whether a frame of type msgType travels from a
// machine to the relay and no further: it is addressed to the relay itself
// ([TypeChainTriggerResult], and the sessionless [TypeAskPublished] and
// [TypeAskResolved]), so a relay consumes it and never forwards one to a
// browser, and a browser never sends one. It is false for every type this
// build does not know.
func MachineToRelayOnly(msgType string) bool {
	switch msgType {
	case TypeChainTriggerResult, TypeAskPublished, TypeAskResolved:
		return true
	}
	return false
}
