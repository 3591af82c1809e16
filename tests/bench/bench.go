// Package bench is the harness behind `make bench` (issue 7): it measures how
// fast and how small relaywasm is, each figure beside a baseline measured in
// the same run, and renders one markdown table.
//
// On a shared 2-core machine single runs vary by ±20%, so no figure stands
// alone: every one is measured beside its baseline, alternated with it, over
// several repetitions, and the table reports medians and the ratio. The
// figures:
//
//  1. Inbound throughput in Chromium: relay.wasm (through relay.js, as an app
//     uses it) delivering a stream of 1 KiB ACP messages from the dev runtime,
//     beside a raw JavaScript WebSocket reading the same stream from the same
//     relay; relay.wasm with its cursor in IndexedDB, in memory, and with a
//     transcript on.
//  2. Round trip in Chromium: sendACP of the dev agent's echo request to its
//     response in onMessage, p50 and p99, beside the raw WebSocket.
//  3. Reload to live: navigation start to the first replayed frame delivered
//     after a reload, and how much of it is fetching and instantiating
//     relay.wasm, beside a raw client that resumes by hand.
//  4. The codec and the engine natively, and 5. the dev relay's routing rate
//     and idle memory: the packages' own benchmarks (go test -bench), which
//     carry their baselines.
//  6. relay.wasm's size raw, gzip -9 and brotli -q 11, beside a Go hello world.
//  7. relay.wasm's memory after a long stream (100,000 messages) in Chromium,
//     Firefox and WebKit, beside its memory once attached.
//
// Chromium runs headless through chromedp with DevTools network tracking
// off, against the stack `go run ./demo` runs (demo/stack), serving the page
// in web/. Figures that miss their target can be profiled (Profile).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Sizes say how much to measure.
type Sizes struct {
	Frames     int // messages per inbound stream
	FrameBytes int // bytes of each streamed chunk's text
	Streams    int // inbound streams per variant
	History    int // the transcript variant's history option
	RoundTrips int // per client
	Reloads    int // per page
	// MemoryFrames are the messages of the memory figure's one stream.
	MemoryFrames int

	CodecTime     string // -benchtime of the codec benchmarks
	EngineStreams int    // -benchtime (N×) of the native engine benchmark
	RouteFrames   int    // -benchtime (N×) of the relay's routing benchmarks
	StallFrames   int    // -benchtime (N×) of the relay's stalled-neighbours benchmark
	NativeCount   int    // -count of every native benchmark but the once ones
	// BrotliQuality is brotli's -q for the size figure: 11, as a server
	// compresses a file it serves many times. Smoke's 1 is a fiftieth of
	// the processor time (11 took 10 s of it for the module and the
	// hello world), and its figure is not read.
	BrotliQuality int
}

// Full are the sizes: a few minutes on this 2-core machine.
func Full() Sizes {
	return Sizes{
		Frames: 20_000, FrameBytes: 1024, Streams: 7, History: 20_000, RoundTrips: 1000, Reloads: 10,
		MemoryFrames: 100_000,
		CodecTime:    "50000x", EngineStreams: 20, RouteFrames: 200_000, StallFrames: 100_000, NativeCount: 5,
		BrotliQuality: 11,
	}
}

// Smoke runs every figure at a tiny size: it proves the harness works, and
// measures nothing worth reading.
func Smoke() Sizes {
	// 2,000 frames, not fewer: the renderer's process CPU time moves in
	// 10 ms steps, and a stream must cost the raw client several of them for
	// its figure not to read as zero.
	return Sizes{
		Frames: 2000, FrameBytes: 1024, Streams: 1, History: 2000, RoundTrips: 20, Reloads: 2,
		MemoryFrames: 2000,
		CodecTime:    "100x", EngineStreams: 1, RouteFrames: 2000, StallFrames: 4000, NativeCount: 1,
		BrotliQuality: 1,
	}
}

// Config says what to measure and with what.
type Config struct {
	Root      string // the module's root directory
	ModuleDir string // relay.wasm, relay.js and wasm_exec.js (`make wasm`: dist/)
	Chromium  string // the browser's executable
	// JSFlags, when not empty, go to Chromium's V8 as --js-flags: an
	// experiment on the engine (--no-liftoff, say), whose
	// figures are not what a user's Chromium gives.
	JSFlags string
	// ChromiumLog, when not nil, receives what Chromium's processes write
	// to stdout and stderr, V8's --trace-gc lines among them; nil drops it.
	ChromiumLog io.Writer
	Sizes       Sizes
	// Profile says which figures to explain with a profile (ProfileNone,
	// ProfileMissed, ProfileAll): the top frames go to Log, the profiles
	// under ProfileDir.
	Profile    string
	ProfileDir string
	Log        io.Writer // progress and profiles; nil discards
	// Only, when not empty, names the figures to measure (Figures lists
	// them), so a change to one part can be measured again in a minute
	// instead of the whole table's few. Empty measures everything.
	Only []string
}

// Figures are the names Config.Only takes: the browser figures one by one,
// then the native benchmarks and the sizes.
var Figures = []string{FigInbound, FigRoundTrip, FigReload, FigNative, FigSize, FigMemory}

// The figures Config.Only can name.
const (
	FigInbound   = "inbound"   // (1) Chromium inbound throughput and CPU per frame
	FigRoundTrip = "roundtrip" // (2) Chromium round trip
	FigReload    = "reload"    // (3) Chromium reload to live
	FigNative    = "native"    // (4) and (5): the codec, the engine, the relay
	FigSize      = "size"      // (6) relay.wasm's size
	FigMemory    = "memory"    // (7) relay.wasm's memory after a long stream, per engine
)

// wants says whether the figure named fig is to be measured.
func (c Config) wants(fig string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, fig)
}

// CheckFigures fails for a name Config.Only does not know.
func CheckFigures(only []string) error {
	for _, f := range only {
		if !slices.Contains(Figures, f) {
			return fmt.Errorf("bench: no figure %q (figures: %s)", f, strings.Join(Figures, ", "))
		}
	}
	return nil
}

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "bench: "+format+"\n", args...)
	}
}

func (c Config) webDir() string { return filepath.Join(c.Root, "tests", "bench", "web") }

// ModuleRoot is the directory of the go.mod governing dir.
func ModuleRoot(dir string) (string, error) {
	cmd := exec.Command("go", "env", "GOMOD")
	cmd.Dir = dir
	out, err := cmd.Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.Join(errors.New("bench: not inside the relaywasm module"), err)
	}
	return filepath.Dir(gomod), nil
}

// Run measures every figure and returns the table's rows. It fails when a
// figure could not be measured (a broken harness), never because a figure
// misses its target.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	if _, err := os.Stat(filepath.Join(cfg.ModuleDir, "relay.wasm")); err != nil {
		return nil, fmt.Errorf("bench: no module to measure (run make wasm): %w", err)
	}
	tmp, err := os.MkdirTemp("", "relaywasm-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := CheckFigures(cfg.Only); err != nil {
		return nil, err
	}
	var rows []Row
	for _, step := range []struct {
		wanted  bool
		figures func() ([]Row, error)
	}{
		// The browser first: it is the most sensitive to what else ran.
		{cfg.wants(FigInbound) || cfg.wants(FigRoundTrip) || cfg.wants(FigReload), func() ([]Row, error) { return browserFigures(ctx, cfg, tmp) }},
		{cfg.wants(FigNative), func() ([]Row, error) { return nativeFigures(ctx, cfg) }},
		{cfg.wants(FigSize), func() ([]Row, error) { return sizeFigures(ctx, cfg, tmp) }},
		{cfg.wants(FigMemory), func() ([]Row, error) { return memoryFigures(ctx, cfg, tmp) }},
	} {
		if !step.wanted {
			continue
		}
		start := time.Now()
		r, err := step.figures()
		if err != nil {
			return rows, err
		}
		cfg.logf("%d figures in %v", len(r), time.Since(start).Round(time.Second))
		rows = append(rows, r...)
	}
	if err := check(rows); err != nil {
		return rows, err
	}
	if cfg.Profile != ProfileNone {
		err = profile(ctx, cfg, rows, tmp)
	}
	return rows, err
}
