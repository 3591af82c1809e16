#!/usr/bin/env bash
# Runs the browser tests (GOOS=js GOARCH=wasm) in a headless browser against
# the dev relay and runtime:
#
#   ENGINE=chromium|firefox|webkit tests/browser/run.sh [go test flags, e.g. -run Store -v]
#
# The whole run has 5 minutes (go test -timeout 5m), room for one pass in
# WebKit on a busy machine; flags given here come after it and win, so a run
# of several passes says so: -count=3 -timeout 25m.
#
# ENGINE defaults to chromium. Chromium runs the tests through
# wasmbrowsertest; Firefox and WebKit through the project's own runner
# (tests/browser/wasmexec, over tests/webdriver), which starts Firefox over
# WebDriver BiDi or WebKitWebDriver under an Xvfb of its own.
#
# It builds the runner and the demo for the host, starts the demo on a
# free loopback port, runs `go test` under `env -i` with a short allowlist
# (wasm_exec.js refuses more than ~8 KB of arguments plus environment, and
# wasmbrowsertest copies the whole environment into the page), and stops the
# demo whatever happens. Everything it writes goes under one temporary folder
# (the browser's profile included), removed at the end. The browser must be
# installed (`make test` installs all three).
set -euo pipefail
cd "$(dirname "$0")/../.."

work=$(mktemp -d "${TMPDIR:-/tmp}/relaywasm-browser.XXXXXX")
demo_pid=
demo2_pid=
cleanup() {
	for pid in $demo_pid $demo2_pid; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

engine=${ENGINE:-chromium}
case "$engine" in
chromium)
	GOOS= GOARCH= go build -o "$work/bin/wasmbrowsertest" github.com/agnivade/wasmbrowsertest
	exec_cmd="$work/bin/wasmbrowsertest"
	;;
firefox | webkit | wpe)
	GOOS= GOARCH= go build -o "$work/bin/wasmexec" ./tests/browser/wasmexec
	exec_cmd="$work/bin/wasmexec -engine=$engine"
	;;
*)
	echo "run.sh: ENGINE must be chromium, firefox, webkit or wpe, not $engine" >&2
	exit 2
	;;
esac
GOOS= GOARCH= go build -o "$work/bin/demo" ./demo

"$work/bin/demo" -addr 127.0.0.1:0 -web "" -ready-file "$work/ready" -log-level warn >"$work/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 300); do
	[ -s "$work/ready" ] && break
	if ! kill -0 "$demo_pid" 2>/dev/null; then
		cat "$work/demo.log" >&2
		echo "run.sh: the demo exited before it was ready" >&2
		exit 1
	fi
	sleep 0.1
done
if [ ! -s "$work/ready" ]; then
	cat "$work/demo.log" >&2
	echo "run.sh: the demo was not ready within 30s" >&2
	exit 1
fi
# shellcheck disable=SC1091
. "$work/ready"

# A second demo whose runtime behaves as contenox v1.0.0 ships: no seq, no
# answer to session.resume (engine_test.go's non-resuming tests).
"$work/bin/demo" -addr 127.0.0.1:0 -web "" -resume=false -ready-file "$work/ready-noresume" -log-level warn >"$work/demo-noresume.log" 2>&1 &
demo2_pid=$!
for _ in $(seq 300); do
	[ -s "$work/ready-noresume" ] && break
	sleep 0.1
done
if [ ! -s "$work/ready-noresume" ]; then
	cat "$work/demo-noresume.log" >&2
	echo "run.sh: the non-resuming demo was not ready within 30s" >&2
	exit 1
fi
RELAY_NORESUME_ATTACH_URL=$(. "$work/ready-noresume" && echo "$RELAY_ATTACH_URL")
RELAY_NORESUME_KEY=$(. "$work/ready-noresume" && echo "$RELAY_KEY")

mkdir -p "$work/tmp"
status=0
env -i \
	HOME="$work" PATH="$PATH" TMPDIR="$work/tmp" \
	GOCACHE="$(go env GOCACHE)" GOMODCACHE="$(go env GOMODCACHE)" GOPROXY="$(go env GOPROXY)" \
	GOFLAGS="${GOFLAGS:-}" GOTOOLCHAIN=local GOOS=js GOARCH=wasm \
	RELAY_ATTACH_URL="$RELAY_ATTACH_URL" RELAY_INSTANCE="$RELAY_INSTANCE" \
	RELAY_TOKEN="$RELAY_TOKEN" RELAY_KEY="$RELAY_KEY" ENGINE="$engine" \
	RELAY_NORESUME_ATTACH_URL="$RELAY_NORESUME_ATTACH_URL" RELAY_NORESUME_KEY="$RELAY_NORESUME_KEY" \
	go test -exec="$exec_cmd" -timeout 5m "$@" ./tests/browser/ || status=$?
if [ "$status" -ne 0 ]; then
	echo "--- tests/browser failed in $engine; demo log" >&2
	cat "$work/demo.log" >&2
	echo "--- non-resuming demo log" >&2
	cat "$work/demo-noresume.log" >&2
fi
exit "$status"
