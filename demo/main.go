// Command demo runs the dev relay, the dev runtime and a static server for
// the chat page on loopback, so that a browser (or a test) has something real
// to talk to:
//
//	go run ./demo
//
// With no flags it listens on 127.0.0.1:8080, serves instance "demo" to the
// client credential "dev-token", connects its own runtime, signs with a fresh
// key (or the one in -key-file, created when missing, so attachment ids
// survive a restart), and serves demo/web and -module at /. It prints where
// to point a browser. With -ready-file it writes, once everything listens and
// the runtime is connected, shell-sourceable lines:
//
//	RELAY_ATTACH_URL=ws://127.0.0.1:8080/v1/attach
//	RELAY_HTTP_URL=http://127.0.0.1:8080
//	RELAY_INSTANCE=demo
//	RELAY_TOKEN=dev-token
//	RELAY_RUNTIME_TOKEN=dev-runtime-token
//	RELAY_KEY=<librelay.FormatPublicKey of the relay key>
//	WEB_URL=http://127.0.0.1:8080/      (only when a page directory is served)
//
// -mode relay runs only the relay (and the page), -mode runtime only the
// runtime (against -relay-url, pinning -relay-key), so a test can restart one
// without the other. Ctrl-C or SIGTERM shuts everything down cleanly.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/runtime"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/relayleg"
)

type options struct {
	mode, addr, instance, clientToken, runtimeToken string
	keyFile, origins, webDir, moduleDir, readyFile  string
	relayURL, relayKey, logLevel                    string
	agentRate                                       float64
	limits                                          relay.Limits
	retainFrames, retainBytes                       int
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.mode, "mode", "all", "what to run: all, relay (relay and page only) or runtime (runtime only)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address of the relay and the page (port 0 picks one)")
	flag.StringVar(&o.instance, "instance", "demo", "the runtime's instance name")
	flag.StringVar(&o.clientToken, "client-token", "dev-token", "browser clients' bearer credential")
	flag.StringVar(&o.runtimeToken, "runtime-token", "dev-runtime-token", "the runtime's bearer credential")
	flag.StringVar(&o.keyFile, "key-file", "", "relay key seed file (hex); created when missing; empty uses a fresh key each run")
	flag.StringVar(&o.origins, "origins", "127.0.0.1,127.0.0.1:*,localhost,localhost:*", "comma-separated browser origins allowed besides the relay's own")
	flag.StringVar(&o.webDir, "web", "demo/web", "chat page directory served at / (skipped when missing)")
	flag.StringVar(&o.moduleDir, "module", "", "directory of relay.wasm and relay.js, served at / after -web")
	flag.StringVar(&o.readyFile, "ready-file", "", "write KEY=VALUE lines here once ready")
	flag.StringVar(&o.relayURL, "relay-url", "", "-mode runtime: the relay's base URL")
	flag.StringVar(&o.relayKey, "relay-key", "", "-mode runtime: the relay's public key to pin")
	flag.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.Float64Var(&o.agentRate, "agent-rate", 0, "dev agent chunks per second (0: as fast as possible)")
	flag.IntVar(&o.retainFrames, "retain-frames", 0, "frames the runtime retains per session (0: 8192)")
	flag.IntVar(&o.retainBytes, "retain-bytes", 0, "bytes the runtime retains per session (0: 8 MiB)")
	l := &o.limits
	flag.DurationVar(&l.Grace, "grace", 0, "attachment grace period after a drop (0: 2m)")
	flag.DurationVar(&l.HeartbeatInterval, "heartbeat", 0, "probe a peer silent this long (0: 15s)")
	flag.DurationVar(&l.HeartbeatTimeout, "heartbeat-timeout", 0, "drop a peer that leaves a probe unanswered this long (0: 10s)")
	flag.IntVar(&l.BrowserFrameBytes, "frame-limit", 0, "largest browser-leg frame in bytes (0: 1 MiB)")
	flag.IntVar(&l.AttachmentsPerInstance, "max-attachments", 0, "attachment ids per instance (0: 1024)")
	flag.IntVar(&l.QueueFrames, "queue-frames", 0, "browser send queue bound in frames (0: 1024)")
	flag.IntVar(&l.QueueBytes, "queue-bytes", 0, "browser send queue bound in bytes (0: 1 MiB)")
	flag.DurationVar(&l.SlowConsumerWait, "slow-consumer-wait", 0, "how long a frame waits for room in a full queue (0: 2s)")
	flag.Parse()
	return o
}

func main() {
	o := parseFlags()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(o.logLevel)}))
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, log); err != nil {
		log.Error("demo failed", "err", err)
		os.Exit(1)
	}
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// run starts what the mode asks for and blocks until ctx ends or a part fails.
func run(ctx context.Context, o options, log *slog.Logger) error {
	if o.mode == "runtime" {
		return runRuntimeOnly(ctx, o, log)
	}
	if o.mode != "all" && o.mode != "relay" {
		return fmt.Errorf("unknown -mode %q", o.mode)
	}
	key, err := loadKey(o.keyFile)
	if err != nil {
		return err
	}
	rl, err := relay.New(relay.Config{
		Key:                key,
		RuntimeCredentials: map[string]string{o.runtimeToken: o.instance},
		ClientCredentials:  map[string]string{o.clientToken: o.instance},
		OriginPatterns:     splitList(o.origins),
		Limits:             o.limits,
		Logger:             log.With("part", "relay"),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	web := newStatic(existingDirs(o.webDir, o.moduleDir))
	srv := &http.Server{Handler: handler(rl, web), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	defer shutdown(srv, rl)
	base := "http://" + ln.Addr().String()
	if o.mode == "all" {
		if err := startRuntime(ctx, o, base, rl.PublicKey(), log, errc); err != nil {
			return err
		}
	}
	announce(o, base, rl.PublicKey(), web != nil, log)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case err := <-errc:
		return err
	}
}

// handler serves the relay's two legs and the page everywhere else.
func handler(rl *relay.Relay, web http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(relayleg.ConnectPath, rl)
	mux.Handle(relayleg.AttachPath, rl)
	if web != nil {
		mux.Handle("/", web)
	}
	return mux
}

func shutdown(srv *http.Server, rl *relay.Relay) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	rl.Close() // hijacked connections are the relay's to close
}

// startRuntime runs the dev runtime against base and waits until it is
// connected, so that the ready file is only written once a browser can attach.
func startRuntime(ctx context.Context, o options, base string, pub ed25519.PublicKey, log *slog.Logger, errc chan<- error) error {
	rt, err := runtime.New(runtimeConfig(o, base, pub, log))
	if err != nil {
		return err
	}
	go func() {
		if err := rt.Run(ctx); err != nil {
			errc <- err
		}
	}()
	select {
	case <-rt.Connected():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func runRuntimeOnly(ctx context.Context, o options, log *slog.Logger) error {
	pub, err := librelay.ParsePublicKey(o.relayKey)
	if err != nil {
		return fmt.Errorf("-relay-key: %w", err)
	}
	rt, err := runtime.New(runtimeConfig(o, o.relayURL, pub, log))
	if err != nil {
		return err
	}
	return rt.Run(ctx)
}

func runtimeConfig(o options, relayURL string, pub ed25519.PublicKey, log *slog.Logger) runtime.Config {
	return runtime.Config{
		Relay: relayURL, Instance: o.instance, Credential: o.runtimeToken, RelayKey: pub,
		AgentRate: o.agentRate, RetainFrames: o.retainFrames, RetainBytes: o.retainBytes,
		HeartbeatInterval: o.limits.HeartbeatInterval, HeartbeatTimeout: o.limits.HeartbeatTimeout,
		Logger: log.With("part", "runtime"),
	}
}

// announce prints where to point a browser and writes the ready file.
func announce(o options, base string, pub ed25519.PublicKey, serving bool, log *slog.Logger) {
	ws := "ws" + strings.TrimPrefix(base, "http") + relayleg.AttachPath
	lines := [][2]string{
		{"RELAY_ATTACH_URL", ws}, {"RELAY_HTTP_URL", base}, {"RELAY_INSTANCE", o.instance},
		{"RELAY_TOKEN", o.clientToken}, {"RELAY_RUNTIME_TOKEN", o.runtimeToken},
		{"RELAY_KEY", librelay.FormatPublicKey(pub)},
	}
	if serving {
		lines = append(lines, [2]string{"WEB_URL", base + "/"})
		fmt.Printf("\n  relaywasm demo: open %s/ in a browser\n\n", base)
	} else {
		fmt.Printf("\n  relaywasm demo relay: attach at %s (no page directory to serve)\n\n", ws)
	}
	if o.readyFile != "" {
		if err := writeReady(o.readyFile, lines); err != nil {
			log.Error("cannot write the ready file", "err", err)
		}
	}
}

// writeReady writes KEY=VALUE lines atomically, so a reader polling for the
// file never sees half of it.
func writeReady(path string, lines [][2]string) error {
	var b strings.Builder
	for _, kv := range lines {
		b.WriteString(kv[0] + "=" + shellQuote(kv[1]) + "\n")
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// shellQuote leaves plain values bare (so make can read them too) and
// single-quotes anything else.
func shellQuote(v string) string {
	if strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+=@") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// loadKey reads the relay key's seed from path, creating the file with a
// fresh seed when it does not exist; an empty path gives a fresh key.
func loadKey(path string) (ed25519.PrivateKey, error) {
	if path == "" {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		seed := make([]byte, ed25519.SeedSize)
		rand.Read(seed)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		return ed25519.NewKeyFromSeed(seed), os.WriteFile(path, []byte(hex.EncodeToString(seed)+"\n"), 0o600)
	}
	if err != nil {
		return nil, err
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s: not a hex Ed25519 seed", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func existingDirs(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); d != "" && err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// static serves files from several directories, the first that has a path
// winning, with .wasm as application/wasm and no caching (a dev server: a
// rebuilt module must be picked up by a reload).
type static struct{ dirs []http.Dir }

func newStatic(dirs []string) http.Handler {
	if len(dirs) == 0 {
		return nil
	}
	s := &static{}
	for _, d := range dirs {
		s.dirs = append(s.dirs, http.Dir(d))
	}
	return s
}

func (s *static) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if strings.HasSuffix(req.URL.Path, ".wasm") {
		w.Header().Set("Content-Type", "application/wasm")
	}
	for _, d := range s.dirs {
		if f, err := d.Open(req.URL.Path); err == nil {
			f.Close()
			http.FileServer(d).ServeHTTP(w, req)
			return
		}
	}
	http.NotFound(w, req)
}
