# relaywasm — the two commands a newcomer needs are `make demo` and `make test`.
# Both install what they need on a fresh Debian machine (Chromium, Firefox ESR
# and WebKitGTK's WebDriver under Xvfb for the browser tests, brotli for
# `make size`), using apt-get when run as root.

SHELL   := bash
GO      ?= go
DIST    := dist
GOROOT  := $(shell $(GO) env GOROOT)
# The race detector where concurrency is the subject; the browser-driving
# suites run without it (Chromium, not Go, is the busy process there).
# librelay runs in both: its tests of frames at the size limit, on one
# goroutine, skip themselves under the race detector, which made them take
# 20 s (skipUnderRace), and run in the native step.
RACE_PKGS := ./librelay/... ./wasm/client/... ./demo/...
NATIVE_PKGS := ./librelay/... ./tests/... ./jsbridge/bundle/...
# The engines the browser suites (tests/browser, tests/e2e) run in; `make
# test-browser ENGINE=firefox` runs one.
ENGINES := chromium firefox webkit
ENGINE  ?= chromium

export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all test test-browser demo demo-app app wasm wasm-flags npm size fuzz bench vet acpsdk browsers chromium brotli node clean \
	engine-chromium engine-firefox engine-webkit engine-wpe

all: test

## demo: build the module and run the dev relay, runtime and chat page on 127.0.0.1:8080.
demo: wasm
	$(GO) run ./demo -module $(DIST) -key-file $(DIST)/dev-relay.key $(DEMO_FLAGS)

## test: every test — unit, conformance, engine chaos, and the browser suites
## (tests/browser and tests/e2e) in Chromium, Firefox and WebKit.
test: browsers brotli wasm app acpsdk vet
	$(GO) test -race -timeout 10m $(RACE_PKGS)
	ENGINE=chromium $(GO) test -timeout 20m $(NATIVE_PKGS)
	@$(MAKE) --no-print-directory -O -j4 $(addprefix e2e-,$(filter-out chromium,$(ENGINES))) $(addprefix browser-,$(ENGINES))

# The other engines' suites run side by side (make -j), as the tests inside
# tests/e2e do (t.Parallel): every run and every test has its own stack,
# ports and browser (or isolated browser context). On two cores they are
# processor-bound, browsers drawing and compiling more than paced streams
# waiting, so side by side keeps both cores busy. Four at a time, not
# three: a tests/browser suite (one page, one test after another) left
# alone at the end kept 1.2 cores busy for its last 50 s; with four the
# step took 265 s against 284, for the same processor time (516 and 514
# processor-seconds). Output is grouped per suite (-O).
e2e-%:
	@echo "tests/e2e in $*"
	@ENGINE=$* $(GO) test -timeout 20m ./tests/e2e/
browser-%:
	@echo "tests/browser in $*"
	@ENGINE=$* tests/browser/run.sh

## test-browser: the browser suites in one engine: make test-browser ENGINE=chromium|firefox|webkit|wpe.
## wpe is WPE WebKit 2.38 (about Safari 16, the older iPhones), not part of make test.
# Only ENGINE's browser is installed or checked: the suites start no other.
test-browser: engine-$(ENGINE) wasm app acpsdk
	ENGINE=$(ENGINE) $(GO) test -timeout 20m ./tests/e2e/
	ENGINE=$(ENGINE) tests/browser/run.sh

## wasm: relay.wasm with relay.js, worker.js and preload.js (each one file, jsbridge/bundle), their .d.ts and the wasm_exec.js of the Go that built it, in dist/.
# WASM_NOINLINE are the packages relay.wasm links but runs only off the hot
# path (fmt and reflect for safejs's errors, time's formatting, strconv, the
# ed25519 check once per connection, base64 of nonces and keys, godebug,
# math/rand/v2 for backoff jitter, internal/cpu at start, unicode/utf16 for
# a JSON string's escaped surrogate pair). Not inlining them leaves code that
# brotli compresses better: 802,366 -> 787,754 B brotli, 1,057,654 ->
# 1,045,992 B gzip, measured with `make size`. unicode/utf16 alone trades
# gzip for brotli: 800,514 -> 797,822 B brotli, 1,064,463 -> 1,065,030 gzip
# (browsers take brotli where the server offers it). Each package was
# measured alone; os, syscall, errors, context and unicode grow the module
# and stay inlined, and runtime, syscall/js, sync, internal/abi and our own
# packages carry every frame, so they keep inlining. tests/bench/size.go
# builds its baseline with these flags (make wasm-flags).
WASM_NOINLINE := fmt reflect time internal/strconv strconv internal/fmtsort \
	crypto/... internal/bisect internal/godebug encoding/... \
	github.com/hack-pad/safejs/internal/... math/rand/v2 internal/cpu unicode/utf16
WASM_FLAGS := -trimpath $(foreach p,$(WASM_NOINLINE),-gcflags=$(p)=-l)

# wasm-flags prints WASM_FLAGS, for tests/bench to build its baseline (a Go
# hello world) as relay.wasm is built, from this one list.
wasm-flags:
	@echo $(WASM_FLAGS)

wasm:
	@mkdir -p $(DIST)
	GOOS=js GOARCH=wasm $(GO) build $(WASM_FLAGS) -ldflags='-s -w' -o $(DIST)/relay.wasm ./wasm
	$(GO) run ./jsbridge/bundle/cmd/bundle -o $(DIST)
	cp $(GOROOT)/lib/wasm/wasm_exec.js $(DIST)/

## npm: the npm package, dist/relaywasm-<version>.tgz (the version is jsbridge/relayjs/package.json's; its README jsbridge/relayjs/README.md).
NPM_VERSION = $(shell node -p 'require("./jsbridge/relayjs/package.json").version')
NPM_TGZ     = $(DIST)/relaywasm-$(NPM_VERSION).tgz
npm: wasm node
	rm -rf $(DIST)/npm && mkdir -p $(DIST)/npm
	cp jsbridge/relayjs/package.json jsbridge/relayjs/README.md $(DIST)/wasm_exec.js $(DIST)/relay.wasm $(DIST)/npm/
	$(GO) run ./jsbridge/bundle/cmd/bundle -o $(DIST)/npm
	cd $(DIST) && npm pack --silent ./npm >/dev/null
	@echo "packed $(NPM_TGZ)"

## app: demo/app's npm packages from its lockfile, and the packed tarball installed as a user would.
app: npm
	cd demo/app && npm ci --no-audit --no-fund && npm install --no-save --no-audit --no-fund ../../$(NPM_TGZ)

## demo-app: demo/app (a Vite app that installs the packed tarball) built and served against the dev relay and runtime.
demo-app: app
	cd demo/app && node_modules/.bin/vite build
	$(GO) run ./demo -web demo/app/dist -module "" -key-file $(DIST)/dev-relay.key $(DEMO_FLAGS)

## size: raw, gzip and brotli sizes of relay.wasm, then its code by package.
size: wasm brotli
	@raw=$$(stat -c %s $(DIST)/relay.wasm); \
	gz=$$(gzip -9 -c $(DIST)/relay.wasm | wc -c); \
	br=$$(brotli -q 11 -c $(DIST)/relay.wasm | wc -c); \
	printf '| relay.wasm | bytes |\n|---|---|\n| raw | %s |\n| gzip -9 | %s |\n| brotli -q 11 | %s |\n' $$raw $$gz $$br
	@# The same module with its name section kept (no -s), so wasmsize can say what the code is made of.
	@GOOS=js GOARCH=wasm $(GO) build $(WASM_FLAGS) -o $(DIST)/relay-names.wasm ./wasm
	@echo; $(GO) run ./tests/tools/wasmsize -top 15 -funcs 0 $(DIST)/relay-names.wasm

## fuzz: each fuzz target for 30 seconds (Go fuzzes one target per run).
FUZZ_TARGETS := FuzzReadFrame FuzzValidate FuzzControlJSON
fuzz:
	@for f in $(FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime 30s ./librelay/ || exit 1; \
	done

## bench: the figures, each beside its baseline, as one markdown table.
bench: chromium wasm brotli
	$(GO) run ./tests/bench/cmd/bench

## acpsdk: the official ACP SDK from tests/acpsdk's committed lockfile, for tests/e2e's SDK tests.
acpsdk: node
	cd tests/acpsdk && npm ci --no-audit --no-fund

vet:
	@unformatted=$$(gofmt -l librelay wasm jsbridge demo tests); \
		if [ -n "$$unformatted" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	GOOS=js GOARCH=wasm $(GO) vet ./librelay/... ./wasm/... ./jsbridge/... ./tests/browser/...

chromium:
	@command -v chromium >/dev/null 2>&1 || $(call apt,chromium)

# browsers: the three engines (Debian's packages), each installed when missing.
browsers: $(addprefix engine-,$(ENGINES))

# engine-NAME: one engine's browser (and what drives it), installed when missing.
engine-chromium: chromium
engine-firefox:
	@command -v firefox-esr >/dev/null 2>&1 || $(call apt,firefox-esr)
engine-webkit:
	@{ command -v WebKitWebDriver && command -v Xvfb && command -v xauth; } >/dev/null 2>&1 || \
		$(call apt,webkit2gtk-driver xvfb xauth)
engine-wpe:
	@{ command -v WPEWebDriver && command -v cog; } >/dev/null 2>&1 || $(call apt,wpewebkit-driver cog)
engine-%:
	@echo "ENGINE must be chromium, firefox, webkit or wpe, not $*" >&2; exit 2

node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || $(call apt,nodejs npm)

brotli:
	@command -v brotli >/dev/null 2>&1 || $(call apt,brotli)

clean:
	rm -rf $(DIST) tests/e2e/out tests/bench/out

# apt installs a Debian package, or says how when not running as root.
define apt
{ if [ "$$(id -u)" = 0 ]; then \
	echo "installing $(1)"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1) >/dev/null; \
else \
	echo "$(1) is missing: run 'sudo apt-get install -y $(1)' (or make as root)" >&2; exit 1; \
fi; }
endef
