package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The native figures come from the packages' own benchmarks, run with
// `go test -bench -json` so that they are measured exactly as their owners
// measure them, each already beside its baseline (encoding/json, a plain
// coder/websocket read loop, plain WebSockets without a relay).

// goBench is one `go test -bench` run.
type goBench struct {
	pkg, pattern string
	benchtime    func(Sizes) string
	once         bool // -count 1: a long set-up measured once (memory under thousands of held sockets)
}

// count is the run's -count.
func (gb goBench) count(z Sizes) string {
	if gb.once {
		return "1"
	}
	return strconv.Itoa(z.NativeCount)
}

// benchRow makes a row from a benchmark's metrics (medians over -count).
type benchRow struct {
	name               string // benchmark name, without the -GOMAXPROCS suffix
	figure, unit       string
	value, base, ratio string                // metric units; base and ratio "" when none
	conv               func(float64) float64 // from the metric to unit; nil keeps it
	baseName           string
	target             *Target
	note               func(metrics) string
	memory             bool // explain a miss with allocations, not CPU
}

// metrics are one benchmark's results: unit → one value per -count run.
type metrics map[string][]float64

func perSecond(nsPerOp float64) float64 { return 1e9 / nsPerOp }

var goBenches = []goBench{
	{"./librelay/", "^Benchmark(ParseFrame|AppendFrame|ReadFrame|WriteFrame)$", func(z Sizes) string { return z.CodecTime }, false},
	{"./wasm/client/", "^BenchmarkInbound$", func(z Sizes) string { return times(z.EngineStreams) }, false},
	{"./demo/relay/", "^BenchmarkRoute", func(z Sizes) string { return times(z.RouteFrames) }, false},
	// 10,000 attachments, set up once per run: -count gives the repetitions.
	{"./demo/relay/", "^BenchmarkIdleAttachment$", func(Sizes) string { return "1x" }, false},
	// Two relay nodes in child processes on NATS, the peers here.
	{"./demo/relay/natstable/", "^BenchmarkCrossNode$", func(z Sizes) string { return times(z.RouteFrames) }, false},
	// A healthy stream beside 16 attachments that never read, alone and
	// beside them in rounds (ABBA) within one run.
	{"./demo/relay/", "^BenchmarkStalledNeighbours$", func(z Sizes) string { return times(z.StallFrames) }, false},
	// Thousands of sockets opened by a child process and held: what the
	// relay keeps for each one before it has a credential.
	{"./demo/relay/", "^Benchmark(PreUpgradeRSS|AwaitingHello)$", func(Sizes) string { return "1x" }, true},
}

func times(n int) string { return strconv.Itoa(n) + "x" }

func codecRow(name, what string) benchRow {
	return benchRow{
		name: name, figure: "codec: librelay " + what + ", 1 KiB cargo frame", unit: "frames/s",
		value: "ns/op", base: "json-ns/op", ratio: "x-vs-json", conv: perSecond, baseName: "encoding/json",
	}
}

func routeRow(name, what string) benchRow {
	return benchRow{
		name: name, figure: "dev relay, 100 attachments ↔ runtime on loopback: " + what, unit: "frames/s",
		value: "frames/s", base: "direct-frames/s", ratio: "relayed/direct", baseName: "plain WebSockets, no relay",
		target: atLeast(100_000, "≥ 100,000 frames/s"),
	}
}

// crossRows are issue 16's figures: relay nodes routing through NATS.
var crossRows = []benchRow{
	{
		name: "BenchmarkCrossNode", figure: "relay nodes on NATS: runtime → 100 browsers on another node, ~200 B chunks", unit: "frames/s",
		value: "cross-frames/s", base: "same-frames/s", ratio: "cross/same", baseName: "browsers on the runtime's node",
		target: ratioAtLeast(0.5),
	},
	{
		name: "BenchmarkCrossNode", figure: "… one frame to a browser on another node, p50", unit: "ms",
		value: "cross-p50-ms", base: "same-p50-ms", ratio: "p50-cross/same", baseName: "on the runtime's node",
		note: func(m metrics) string { return fmt.Sprintf("the hop adds %.2f ms", median(m["hop-p50-ms"])) },
	},
	{
		name: "BenchmarkCrossNode", figure: "… p99", unit: "ms",
		value: "cross-p99-ms", base: "same-p99-ms", ratio: "p99-cross/same", baseName: "on the runtime's node",
		target: withinOf(2, "hop adds < 2 ms"),
		note:   func(m metrics) string { return fmt.Sprintf("the hop adds %.2f ms", median(m["hop-p99-ms"])) },
	},
	{
		name: "BenchmarkCrossNode", figure: "… CPU per frame, the runtime's node", unit: "µs",
		value: "node-A-cpu-ns/frame", base: "same-cpu-ns/frame", ratio: "A-cpu/same", conv: micro,
		baseName: "one node routing to its own browsers",
	},
	{
		name: "BenchmarkCrossNode", figure: "… CPU per frame, the browsers' node", unit: "µs",
		value: "node-B-cpu-ns/frame", base: "same-cpu-ns/frame", ratio: "B-cpu/same", conv: micro,
		baseName: "one node routing to its own browsers",
	},
}

func micro(ns float64) float64 { return ns / 1000 }

var benchRows = []benchRow{
	codecRow("BenchmarkParseFrame", "ParseFrame (one message)"),
	codecRow("BenchmarkAppendFrame", "AppendFrame (one message)"),
	codecRow("BenchmarkReadFrame/librelay", "Reader.ReadFrame (NDJSON)"),
	codecRow("BenchmarkWriteFrame/librelay", "Writer.WriteFrame (NDJSON)"),
	{
		name: "BenchmarkInbound", figure: "engine (wasm/client) natively, a stream of 1 KiB ACP messages", unit: "frames/s",
		value: "engine-frames/s", base: "plain-frames/s", ratio: "engine/plain", baseName: "plain coder/websocket read loop",
	},
	routeRow("BenchmarkRouteToBrowsers/chunk", "to browsers, ~200 B chunks"),
	routeRow("BenchmarkRouteToBrowsers/1024B", "to browsers, 1 KiB"),
	routeRow("BenchmarkRouteToRuntime/chunk", "to runtime, ~200 B chunks"),
	routeRow("BenchmarkRouteToRuntime/1024B", "to runtime, 1 KiB"),
	{
		name: "BenchmarkIdleAttachment", figure: "dev relay heap per idle browser attachment, 10,000 attached", unit: "B",
		value: "heap-B/attachment", target: atMost(16<<10, "≤ 16 KiB"), memory: true,
		note: func(m metrics) string {
			return fmt.Sprintf("goroutine stack %s B more", count(int(median(m["stack-B/attachment"]))))
		},
	},
	{
		name: "BenchmarkStalledNeighbours", figure: "dev relay, a healthy attachment beside 16 stalled ones of its instance, chunk frames", unit: "frames/s",
		value: "stalled16-frames/s", base: "alone-frames/s", ratio: "stalled16/alone", baseName: "the same stream with no stalled neighbour",
		target: ratioAtLeast(0.9),
	},
	{
		name: "BenchmarkPreUpgradeRSS", figure: "dev relay, 2,000 connections holding an unfinished upgrade request (a 15 KiB header): resident memory above idle", unit: "MiB",
		value: "MiB-above-idle", target: atMost(64, "< 64 MiB"), memory: true,
		note: func(m metrics) string { return fmt.Sprintf("idle %.1f MiB", median(m["idle-MiB"])) },
	},
	{
		name: "BenchmarkAwaitingHello", figure: "dev relay, heap and stack per socket awaiting its hello (1,000, 15 KiB of upgrade headers each)", unit: "B",
		value: "heap+stack-B/socket", target: atMost(15<<10, "< its 15 KiB of headers"), memory: true,
	},
}

// nativeFigures runs every benchmark and makes figures (4) and (5).
func nativeFigures(ctx context.Context, cfg Config) ([]Row, error) {
	results := map[string]metrics{}
	for _, gb := range goBenches {
		start := time.Now()
		if err := runGoBench(ctx, cfg, gb, results); err != nil {
			return nil, err
		}
		cfg.logf("native: go test -bench %s %s: %v", gb.pattern, gb.pkg, time.Since(start).Round(time.Second))
	}
	var rows []Row
	for _, br := range append(benchRows, crossRows...) {
		r, err := br.row(results[br.name])
		if err != nil {
			return nil, err
		}
		r.why = br.why
		rows = append(rows, r)
	}
	return rows, nil
}

// why profiles the benchmark again under pprof.
func (br benchRow) why(p *prober) (string, error) {
	top, _, _ := strings.Cut(br.name, "/")
	for _, gb := range goBenches {
		if regexp.MustCompile(gb.pattern).MatchString(top) {
			return p.whyNative(gb, br.name, br.memory)
		}
	}
	return "", fmt.Errorf("no go test run for %s", br.name)
}

func (br benchRow) row(m metrics) (Row, error) {
	conv := br.conv
	if conv == nil {
		conv = func(v float64) float64 { return v }
	}
	for _, unit := range []string{br.value, br.base, br.ratio} {
		if unit != "" && len(m[unit]) == 0 {
			return Row{}, fmt.Errorf("%s reported no %s", br.name, unit)
		}
	}
	r := Row{Figure: br.figure, Unit: br.unit, Value: conv(median(m[br.value])), Target: br.target}
	if br.base != "" {
		r.Baseline, r.BaseName, r.Ratio = conv(median(m[br.base])), br.baseName, median(m[br.ratio])
	}
	if br.note != nil {
		r.Note = br.note(m)
	}
	return r, nil
}

// runGoBench runs one `go test -bench -json` from the module root and adds
// its results. A failing benchmark fails the run, with its output.
func runGoBench(ctx context.Context, cfg Config, gb goBench, into map[string]metrics) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", gb.pattern,
		"-benchtime", gb.benchtime(cfg.Sizes), "-count", gb.count(cfg.Sizes), "-json", gb.pkg)
	cmd.Dir = cfg.Root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	text := benchOutput(out)
	if err != nil {
		return fmt.Errorf("go test -bench %s %s: %w\n%s%s", gb.pattern, gb.pkg, err, text, stderr.Bytes())
	}
	parseBenchLines(text, into)
	return nil
}

// benchOutput joins the Output of a `go test -json` stream: a result line
// may arrive in more than one event.
func benchOutput(jsonLines []byte) string {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(jsonLines))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Action, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Action == "output" {
			b.WriteString(ev.Output)
		}
	}
	return b.String()
}

// procSuffix is the -GOMAXPROCS suffix of a result's name.
var procSuffix = regexp.MustCompile(`-\d+$`)

// parseBenchLines reads the standard result lines:
// "BenchmarkX-2  N  v1 unit1  v2 unit2 …".
func parseBenchLines(text string, into map[string]metrics) {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if into[name] == nil {
			into[name] = metrics{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				into[name][f[i+1]] = append(into[name][f[i+1]], v)
			}
		}
	}
}
