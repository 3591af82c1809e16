// Package conformance is a relay conformance suite: what any relay serving
// the relaywasm browser leg and the contenox runtime leg must do, written as
// tests that fail when the rule they check breaks. It plays a raw runtime
// (the runtime leg by hand, NDJSON through librelay) and raw browser clients
// (coder/websocket), and never looks inside the relay.
//
// With no flags it starts the dev relay (demo/relay) in-process, with short
// grace and heartbeat periods where a test needs them, and runs every rule
// twice: over plain HTTP, then over TLS with a certificate relaytest makes
// for each test (-tls=plain or -tls=tls runs one of the two):
//
//	go test ./tests/conformance
//
// Against another relay, give its base URL, credentials and public key:
//
//	go test ./tests/conformance -relay=http://127.0.0.1:8080 \
//	    -instance=demo -runtime-token=… -client-token=… -relay-key=… -origin=http://127.0.0.1:3000
//
// An https -relay is dialled over TLS on both legs, trusting the CA in -ca
// (a PEM file) or the system roots. The suite connects its own runtime for
// -instance, so no other runtime may hold it (run `go run ./demo -mode
// relay`, not the demo with its own runtime): a relay keeps an instance for
// the connection that holds it while that one answers. Tests that depend on the relay's own settings take
// them as flags and are skipped, with the reason, when the flag is not given:
// -grace (the relay's grace period; the test waits that long), -heartbeat
// (set to probe the relay's idle-peer heartbeat, which takes its interval
// plus timeout), -other-client-token (a second credential allowed on
// -instance) and -any-client-token / -any-runtime-token (credentials allowed
// on any instance). -frame-limit, -hello-limit and -flood-bytes size the
// oversize and slow-consumer tests. -flood-bytes (64 MiB) must exceed the
// relay's send queue (the dev relay's is 16 MiB); TestSlowConsumer reads
// the shed socket as soon as its flood ends, so the rest of the flood and
// the queue's drain must fit in the relay's close timeout (5 s by default):
// over a slow link, make the flood little more than the queue. Sixteen
// sockets stalled together (TestStalledConsumersShedAtOnce) take longer
// than that to drain, so that rule runs in-process only.
package conformance
