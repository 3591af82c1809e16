// Command demo runs the dev relay, the dev runtime and a static server for
// the chat page on loopback, so that a browser (or a test) has something real
// to talk to:
//
//	go run ./demo
//
// With no flags it listens on 127.0.0.1:8080, serves instance "demo" to the
// client credential "dev-token", connects its own runtime, signs with a fresh
// key (or the one in -key-file, created when missing, so attachment ids
// survive a restart), and serves demo/web at / with the module's files
// (stack.ModuleFiles) from -module beside it (default dist/, where `make
// wasm` builds them, when it exists). It prints where to point a browser:
// the page's URL with the relay key in its fragment,
//
//	http://127.0.0.1:8080/#key=<RELAY_KEY, URL-escaped>
//
// so the page pins the key and refuses a relay that cannot sign with it; it
// says to run `make wasm` when relay.wasm is missing. What it runs is demo/stack, which the end-to-end tests and the
// benchmarks start in-process. With -ready-file it writes, once everything
// listens and the runtime is connected, shell-sourceable lines:
//
//	RELAY_ATTACH_URL=ws://127.0.0.1:8080/v1/attach
//	RELAY_HTTP_URL=http://127.0.0.1:8080
//	RELAY_CONNECT_URL=http://127.0.0.1:8080/v1/connect   (what a runtime dials)
//	RELAY_INSTANCE=demo
//	RELAY_TOKEN=dev-token
//	RELAY_RUNTIME_TOKEN=dev-runtime-token
//	RELAY_KEY=<librelay.FormatPublicKey of the relay key>
//	WEB_URL=http://127.0.0.1:8080/      (only when a page directory is served)
//
// -mode relay runs only the relay (and the page), -mode runtime only the
// runtime (against -relay-url, pinning -relay-key, trusting -relay-ca for
// https), so a test can restart one without the other. -resume=false runs a
// runtime that behaves as contenox v1.0.0 ships: no seq, no retention, no
// answer to session.resume. Ctrl-C or SIGTERM shuts everything down cleanly.
//
// With -tls-cert and -tls-key the relay and the page are served over TLS
// (1.3 at least) and every URL above says https or wss: that is what a
// contenox runtime needs, whose connector dials https only. Point it at
// RELAY_CONNECT_URL as its endpoint, with RELAY_KEY as the relay key, the
// runtime credential as its token and the instance as its id (README,
// "A contenox runtime against the dev relay"); -mode relay leaves the
// instance to it.
//
// Several relay nodes route through NATS (demo/relay/natstable):
//
//	go run ./demo -nodes 3
//
// starts a NATS server in-process on loopback and three relay nodes on
// -addr's port and the two after it (8080, 8081, 8082), each serving the
// page, with the runtime on the first; a page opened on any node attaches
// through that node, and shows which. -nats nats://… routes through an
// existing NATS instead: one process per node, each with -mode relay (or
// all, for the node the runtime dials), the same -key-file (it signs the
// welcomes the page pins) and the same -id-key-file (it keys the attachment
// ids every node must verify):
//
//	go run ./demo -mode relay -nats nats://10.0.0.5:4222 -addr :8081 -key-file k -id-key-file ik
//
// The ready file then also has NATS_URL and RELAY_NODES, the nodes' base
// URLs separated by spaces. With -tls-cert and -tls-key every node serves
// both legs and the page over TLS, as the single relay does (the embedded
// NATS stays plain, on loopback), so a contenox runtime can dial any node.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

type options struct {
	mode, addr, instance, clientToken, runtimeToken string
	keyFile, origins, webDir, moduleDir, readyFile  string
	hosts                                           string
	relayURL, relayKey, logLevel                    string
	tlsCert, tlsKey, relayCA                        string
	natsURL, idKeyFile                              string
	nodes                                           int
	agentRate                                       float64
	limits                                          relay.Limits
	retainFrames, retainBytes                       int
	resume                                          bool // -resume: false behaves as contenox ships
}

// parseFlags parses args (main's are os.Args[1:]) into options on fs; the
// tests parse theirs the same way, so a flag they set is one main takes.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.mode, "mode", "all", "what to run: all, relay (relay and page only) or runtime (runtime only)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address of the relay and the page (port 0 picks one)")
	fs.StringVar(&o.instance, "instance", "demo", "the runtime's instance name")
	fs.StringVar(&o.clientToken, "client-token", "dev-token", "browser clients' bearer credential")
	fs.StringVar(&o.runtimeToken, "runtime-token", "dev-runtime-token", "the runtime's bearer credential")
	fs.StringVar(&o.keyFile, "key-file", "", "relay key seed file (hex); created when missing; empty uses a fresh key each run")
	fs.StringVar(&o.hosts, "hosts", "", "comma-separated Host names the browser leg serves besides loopback names and -addr's (DNS rebinding guard)")
	fs.StringVar(&o.origins, "origins", "127.0.0.1,127.0.0.1:*,localhost,localhost:*", "comma-separated browser origins allowed besides the relay's own")
	fs.StringVar(&o.webDir, "web", "demo/web", "chat page directory served at / (skipped when missing)")
	fs.StringVar(&o.moduleDir, "module", defaultModuleDir(), "directory of relay.wasm, relay.js, relay.d.ts and wasm_exec.js (make wasm builds them into dist), served at / beside -web")
	fs.StringVar(&o.readyFile, "ready-file", "", "write KEY=VALUE lines here once ready")
	fs.StringVar(&o.relayURL, "relay-url", "", "-mode runtime: the relay's base URL")
	fs.StringVar(&o.relayKey, "relay-key", "", "-mode runtime: the relay's public key to pin")
	fs.StringVar(&o.natsURL, "nats", "", "route through this NATS server or cluster (nats://host:port, or tls://host:port to encrypt the link: -tls-cert does not cover it), as one node of several")
	fs.IntVar(&o.nodes, "nodes", 1, "relay nodes to run, on -addr's port and the ones after it; more than one starts NATS in-process unless -nats names one")
	fs.StringVar(&o.idKeyFile, "id-key-file", "", "attachment-id key file (hex), shared by every node; created when missing; empty derives it from the relay key")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate chain: serve both legs and the page over TLS (1.3 minimum), as a contenox runtime needs; needs -tls-key")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&o.relayCA, "relay-ca", "", "-mode runtime: PEM file of the CA to trust for an https -relay-url (empty: the system roots)")
	fs.Float64Var(&o.agentRate, "agent-rate", 0, "dev agent chunks per second (0: as fast as possible)")
	fs.IntVar(&o.retainFrames, "retain-frames", 0, "frames the runtime retains per session (0: 8192)")
	fs.IntVar(&o.retainBytes, "retain-bytes", 0, "bytes the runtime retains per session (0: 8 MiB)")
	fs.BoolVar(&o.resume, "resume", true, "the runtime stamps seq and answers session.resume; false behaves as contenox v1.0.0 ships (neither)")
	l := &o.limits
	fs.DurationVar(&l.Grace, "grace", 0, "attachment grace period after a drop (0: 2m)")
	fs.DurationVar(&l.HeartbeatInterval, "heartbeat", 0, "probe a peer silent this long (0: 15s)")
	fs.DurationVar(&l.HeartbeatTimeout, "heartbeat-timeout", 0, "drop a peer that leaves a probe unanswered this long (0: 10s)")
	fs.IntVar(&l.BrowserFrameBytes, "frame-limit", 0, "largest browser-leg frame in bytes (0: 1 MiB)")
	fs.IntVar(&l.AttachmentsPerInstance, "max-attachments", 0, "attachment ids per instance, and the runtime's sessions (0: 256)")
	fs.IntVar(&l.PendingConns, "max-pending-conns", 0, "connections not yet upgraded to either leg (any request counts until then); past it HTTP 503, or over TLS closed unanswered (0: 1024)")
	fs.IntVar(&l.PendingConnsPerAddress, "max-pending-conns-per-address", 0,
		"connections not yet upgraded from one client address (an IPv6 client's /64); past it HTTP 503, or over TLS closed unanswered. "+
			"Behind a reverse proxy every client has the proxy's address: raise it to -max-pending-conns there "+
			"(0: max-pending-conns/16, at least 8; never above max-pending-conns)")
	fs.IntVar(&l.PendingHellos, "max-pending-hellos", 0, "browser sockets awaiting their hello; past it HTTP 503 (0: 1024)")
	fs.IntVar(&l.QueueFrames, "queue-frames", 0, "browser send queue bound in frames (0: 16384)")
	fs.IntVar(&l.QueueBytes, "queue-bytes", 0, "browser send queue bound in bytes (0: 16 MiB)")
	err := fs.Parse(args)
	return o, err
}

func main() {
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		os.Exit(2) // flag.CommandLine exits on its own; this is for form
	}
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
	if o.nodes > 1 || o.natsURL != "" {
		return runCluster(ctx, o, key, log)
	}
	s, err := startStack(ctx, o, key, log)
	if err != nil {
		return err
	}
	defer s.Close()
	announce(o, s, log)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case err := <-s.Err():
		return err
	}
}

// startStack starts the single relay (and the page, and the runtime unless
// -mode relay) as the flags in o say.
func startStack(ctx context.Context, o options, key ed25519.PrivateKey, log *slog.Logger) (*stack.Stack, error) {
	return stack.Start(ctx, stack.Config{
		Addr: o.addr, WebDir: o.webDir, ModuleDir: o.moduleDir,
		Instance: o.instance, ClientToken: o.clientToken, RuntimeToken: o.runtimeToken,
		Key: key, RelayOnly: o.mode == "relay", Logger: log,
		EditRelay: func(c *relay.Config) {
			c.OriginPatterns = splitList(o.origins)
			c.Hosts = splitList(o.hosts)
			c.Limits = o.limits
			c.TLSCert, c.TLSKey = o.tlsCert, o.tlsKey
		},
		EditRuntime: func(c *devruntime.Config) { editRuntime(c, o) },
	})
}

// runCluster runs -nodes relay nodes routing through NATS (-nats, or one
// in-process), and the runtime on the first unless -mode relay.
func runCluster(ctx context.Context, o options, key ed25519.PrivateKey, log *slog.Logger) error {
	c, err := startCluster(ctx, o, key, log)
	if err != nil {
		return err
	}
	defer c.Close()
	announceCluster(o, c, log)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case err := <-c.Err():
		return err
	}
}

// startCluster starts the relay nodes (each serving the page, over TLS
// with -tls-cert as the single relay is) and, unless -mode relay, the
// runtime, as the flags in o say.
func startCluster(ctx context.Context, o options, key ed25519.PrivateKey, log *slog.Logger) (*stack.Cluster, error) {
	idKey, err := loadSecret(o.idKeyFile, 32)
	if err != nil {
		return nil, err
	}
	return stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: o.nodes, Addr: o.addr, NATS: o.natsURL, WebDir: o.webDir, ModuleDir: o.moduleDir,
		Instance: o.instance, ClientToken: o.clientToken, RuntimeToken: o.runtimeToken,
		Key: key, RelayOnly: o.mode == "relay", Logger: log,
		EditRelay: func(_ int, c *relay.Config) {
			c.OriginPatterns = splitList(o.origins)
			c.Hosts = splitList(o.hosts)
			c.Limits = o.limits
			c.AttachmentKey = idKey
			c.TLSCert, c.TLSKey = o.tlsCert, o.tlsKey
		},
		EditRuntime: func(c *devruntime.Config) { editRuntime(c, o) },
	})
}

// announceCluster prints each node's page and writes the ready file, whose
// RELAY_* lines name the first node.
func announceCluster(o options, c *stack.Cluster, log *slog.Logger) {
	nodes := c.Nodes()
	key := librelay.FormatPublicKey(c.PublicKey())
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.HTTPURL())
	}
	lines := [][2]string{
		{"RELAY_ATTACH_URL", nodes[0].AttachURL()}, {"RELAY_HTTP_URL", nodes[0].HTTPURL()},
		{"RELAY_CONNECT_URL", nodes[0].HTTPURL() + relayleg.ConnectPath}, {"RELAY_INSTANCE", o.instance},
		{"RELAY_TOKEN", o.clientToken}, {"RELAY_RUNTIME_TOKEN", o.runtimeToken}, {"RELAY_KEY", key},
		{"NATS_URL", c.NATSURL()}, {"RELAY_NODES", strings.Join(urls, " ")},
	}
	fmt.Printf("\n  relaywasm demo: %d relay node(s) routing through NATS at %s\n", len(nodes), c.NATSURL())
	for i, n := range nodes {
		where := ""
		if i == c.Config().RuntimeNode && o.mode != "relay" {
			where = "  (the runtime is attached here)"
		}
		if isDir(o.webDir) {
			fmt.Printf("  node %d: open %s/#key=%s%s\n", i, n.HTTPURL(), url.QueryEscape(key), where)
		} else {
			fmt.Printf("  node %d: attach at %s%s\n", i, n.AttachURL(), where)
		}
	}
	fmt.Printf("\n  runtime leg: %s%s on any node (instance %s, runtime credential %s)\n  relay key:   %s\n\n",
		nodes[0].HTTPURL(), relayleg.ConnectPath, o.instance, o.runtimeToken, key)
	if isDir(o.webDir) {
		lines = append(lines, [2]string{"WEB_URL", nodes[0].HTTPURL() + "/"})
		if hint := moduleHint(o.webDir, o.moduleDir); hint != "" {
			fmt.Printf("  %s\n\n", hint)
			log.Warn(hint)
		}
	}
	if o.readyFile != "" {
		if err := writeReady(o.readyFile, lines); err != nil {
			log.Error("cannot write the ready file", "err", err)
		}
	}
}

// loadSecret reads n hex-encoded bytes from path, creating the file with
// fresh ones when it does not exist; an empty path gives nil.
func loadSecret(path string, n int) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		secret := make([]byte, n)
		rand.Read(secret)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		return secret, os.WriteFile(path, []byte(hex.EncodeToString(secret)+"\n"), 0o600)
	}
	if err != nil {
		return nil, err
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(secret) < 16 {
		return nil, fmt.Errorf("%s: not a hex key of at least 16 bytes", path)
	}
	return secret, nil
}

func runRuntimeOnly(ctx context.Context, o options, log *slog.Logger) error {
	pub, err := librelay.ParsePublicKey(o.relayKey)
	if err != nil {
		return fmt.Errorf("-relay-key: %w", err)
	}
	cfg := devruntime.Config{
		Relay: o.relayURL, Instance: o.instance, Credential: o.runtimeToken, RelayKey: pub,
		Logger: log.With("part", "runtime"),
	}
	editRuntime(&cfg, o)
	if o.relayCA != "" {
		pem, err := os.ReadFile(o.relayCA)
		if err != nil {
			return fmt.Errorf("-relay-ca: %w", err)
		}
		cfg.TLS = &tls.Config{RootCAs: x509.NewCertPool()}
		if !cfg.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("-relay-ca: no certificate in %s", o.relayCA)
		}
	}
	rt, err := devruntime.New(cfg)
	if err != nil {
		return err
	}
	return rt.Run(ctx)
}

// editRuntime applies the runtime's flags; the relay's heartbeat flags pace
// the runtime's side of the leg too, and -max-attachments bounds its sessions.
func editRuntime(c *devruntime.Config, o options) {
	c.AgentRate, c.RetainFrames, c.RetainBytes = o.agentRate, o.retainFrames, o.retainBytes
	c.NoResume = !o.resume
	c.HeartbeatInterval, c.HeartbeatTimeout = o.limits.HeartbeatInterval, o.limits.HeartbeatTimeout
	// The runtime keeps a session for every id the relay may grant, or fresh
	// attachments would evict live ones' streams.
	c.MaxSessions = o.limits.AttachmentsPerInstance
}

// announce prints where to point a browser and writes the ready file.
func announce(o options, s *stack.Stack, log *slog.Logger) {
	lines := [][2]string{
		{"RELAY_ATTACH_URL", s.AttachURL()}, {"RELAY_HTTP_URL", s.HTTPURL()},
		{"RELAY_CONNECT_URL", s.HTTPURL() + relayleg.ConnectPath}, {"RELAY_INSTANCE", o.instance},
		{"RELAY_TOKEN", o.clientToken}, {"RELAY_RUNTIME_TOKEN", o.runtimeToken},
		{"RELAY_KEY", librelay.FormatPublicKey(s.PublicKey())},
	}
	if isDir(o.webDir) {
		lines = append(lines, [2]string{"WEB_URL", s.PageURL()})
		fmt.Printf("\n  relaywasm demo: open %s in a browser\n", s.PinnedPageURL())
		fmt.Printf("  (the fragment pins the relay's key; %s alone works without pinning)\n\n", s.PageURL())
		if hint := moduleHint(o.webDir, o.moduleDir); hint != "" {
			fmt.Printf("  %s\n\n", hint)
			log.Warn(hint)
		}
	} else {
		fmt.Printf("\n  relaywasm demo relay: attach at %s (no page directory to serve)\n\n", s.AttachURL())
	}
	fmt.Printf("  runtime leg: %s%s (instance %s, runtime credential %s)\n  relay key:   %s\n\n",
		s.HTTPURL(), relayleg.ConnectPath, o.instance, o.runtimeToken, librelay.FormatPublicKey(s.PublicKey()))
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

// defaultModuleDir is dist when it exists: `make wasm` builds the module
// there, so `go run ./demo` after it serves a working page with no flags.
func defaultModuleDir() string {
	if isDir("dist") {
		return "dist"
	}
	return ""
}

// moduleHint says what to do when the page in webDir is served without
// relay.wasm beside it (the page would only report that the module did not
// load), or returns "". A page that carries a module of its own, as a
// bundler's output does (demo/app's: assets/relay-<hash>.wasm), needs none.
func moduleHint(webDir, dir string) string {
	if carriesModule(webDir) {
		return ""
	}
	if dir == "" {
		return "no module directory: the page needs relay.wasm; run make wasm (it builds dist/) or pass -module <dir>"
	}
	if _, err := os.Stat(filepath.Join(dir, "relay.wasm")); err != nil {
		return "no relay.wasm in " + dir + ": the page needs it; run make wasm"
	}
	return ""
}

// carriesModule reports whether the page directory holds a .wasm file.
func carriesModule(webDir string) bool {
	found := errors.New("found")
	err := filepath.WalkDir(webDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".wasm") {
			return found
		}
		return err
	})
	return err == found
}

// isDir reports whether d names a directory (the stack serves a page only
// from one that exists).
func isDir(d string) bool {
	st, err := os.Stat(d)
	return d != "" && err == nil && st.IsDir()
}
