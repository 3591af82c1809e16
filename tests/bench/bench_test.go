package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/tests/chromium"
)

// TestSmoke runs the whole harness at tiny sizes, so that `make test` keeps
// it from rotting: every figure must come out measured (Run fails on a
// missing or zero one, a stream that lost a message, a page that threw). No
// figure is compared with its target here: that is `make bench`'s job.
func TestSmoke(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Root: root, ModuleDir: moduleDir(root), Chromium: chromium.Path(), Sizes: Smoke(),
		Log: testLog{t},
	}
	rows, err := Run(context.Background(), cfg)
	var table strings.Builder
	Render(&table, rows)
	t.Log("\n" + table.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{
		"Chromium inbound, relay.wasm, IndexedDB cursor", "cursor off", "transcript on", "CPU per frame",
		"round trip", "reloaded page, p99", "reload to live", "fetching + instantiating", "codec", "engine",
		"to browsers", "to runtime", "idle browser attachment", "stalled ones", "unfinished upgrade", "awaiting its hello",
		"gzip", "brotli",
	} {
		if !strings.Contains(table.String(), family) {
			t.Errorf("no figure for %q", family)
		}
	}
}

// moduleDir is RELAYWASM_MODULE_DIR or the module's dist/ (`make test`
// builds it first).
func moduleDir(root string) string {
	if d := os.Getenv("RELAYWASM_MODULE_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, "dist")
}

// testLog shows the harness's progress with -v.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func TestParseBenchLines(t *testing.T) {
	// A result line may arrive split across `go test -json` events; the
	// joined text is what is parsed.
	text := "goos: linux\nBenchmarkRouteToBrowsers/1024B-2         \t" +
		"   20000\t     20124 ns/op\t    105114 direct-frames/s\t    127450 frames/s\t         1.212 relayed/direct\n" +
		"BenchmarkRouteToBrowsers/1024B-2 \t 20000\t 20000 ns/op\t 100000 direct-frames/s\t 130000 frames/s\t 1.3 relayed/direct\n" +
		"--- BENCH: not a result\nPASS\n"
	got := map[string]metrics{}
	parseBenchLines(text, got)
	m := got["BenchmarkRouteToBrowsers/1024B"]
	if len(got) != 1 || len(m["frames/s"]) != 2 || m["frames/s"][1] != 130000 || m["relayed/direct"][0] != 1.212 {
		t.Fatalf("parsed %v", got)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct{ p, want float64 }{{50, 3}, {99, 5}, {20, 1}, {1, 1}} {
		if got := percentile(xs, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", got)
	}
	if xs[0] != 5 {
		t.Error("percentile sorted its input")
	}
}

// The round trip's targets are the for the default, main-thread
// mode; worker mode's round trips are reported with none, so a table never
// marks them missed against a target nobody set.
func TestRoundTripTargetsAreTheMainThreads(t *testing.T) {
	ms := []float64{0.5, 0.6, 3}
	r := rttSample{
		ms:  map[string][]float64{wasmIDB: ms, wasmWorker: ms, rawJS: ms},
		cpu: map[string][]float64{wasmIDB: ms, wasmWorker: ms, rawJS: ms},
	}
	for _, row := range r.rows("first load, ", false) {
		worker := strings.Contains(row.Figure, "worker mode")
		percentile := strings.Contains(row.Figure, " p50 ") || strings.Contains(row.Figure, " p99 ")
		switch want := percentile && !worker; {
		case want && row.Target == nil:
			t.Errorf("%s: no target, want within 1 ms of raw", row.Figure)
		case !want && row.Target != nil:
			t.Errorf("%s: target %q, want none", row.Figure, row.Target.Text)
		}
	}
}

func TestTailOverlaps(t *testing.T) {
	// 100 round trips of 1 ms on the main thread (pid 1, tid 1), one every
	// 2 ms; numbers 10 and 20 took 5 ms. A wasm compile on a pool thread
	// overlaps number 10 and number 50; a garbage collection overlaps 20 on
	// the main thread, and another on a worker's thread overlaps 30, which
	// does not count: only the main thread's pause holds a round trip.
	var ev []traceEvent
	for i := range 100 {
		from, d := float64(i*2000), 1000.0
		if i == 10 || i == 20 {
			d = 5000
		}
		ev = append(ev, traceEvent{Name: "rt wasm", Ph: "b", TS: from, PID: 1, TID: 1},
			traceEvent{Name: "rt wasm", Ph: "e", TS: from + d, PID: 1, TID: 1})
	}
	ev = append(ev,
		traceEvent{Name: "wasm.TopTierCompilation", Ph: "X", TS: 20500, Dur: 100, TDur: 80, PID: 1, TID: 7},
		traceEvent{Name: "wasm.TopTierCompilation", Ph: "X", TS: 100500, Dur: 100, TDur: 80, PID: 1, TID: 7},
		traceEvent{Name: "wasm.TopTierCompilation", Ph: "X", TS: 100500, Dur: 100, TDur: 80, PID: 2, TID: 7}, // another renderer
		traceEvent{Name: "MinorGC", Ph: "X", TS: 43000, Dur: 500, PID: 1, TID: 1},
		traceEvent{Name: "MinorGC", Ph: "X", TS: 60100, Dur: 500, PID: 1, TID: 9},
	)
	r, ok := tail(ev, "wasm", 0.02)
	if !ok || r.n != 100 || r.slow != 2 || r.threshold != 5 || r.pid != 1 || r.window != (span{0, 199000}) {
		t.Fatalf("tail: %v (%+v)", ok, r)
	}
	want := map[string][2]float64{ // slow share, others' share
		"wasm top-tier compiles":           {0.5, 1.0 / 98},
		"a main-thread garbage collection": {0.5, 0},
	}
	for i, kind := range overlapKinds {
		if w, ok := want[kind.name]; ok && (r.slowShare[i] != w[0] || r.otherShare[i] != w[1]) {
			t.Errorf("%s: slow %v, others %v; want %v", kind.name, r.slowShare[i], r.otherShare[i], w)
		}
	}
	if _, ok := tail(ev, "raw", 0.01); ok {
		t.Error("a variant with no measures has a tail")
	}
	n, ms, early := topTierCompiles(ev, 1, r.window)
	if n != 2 || ms != 0.16 || early != 0.5 {
		t.Errorf("top-tier compiles: %d, %v ms of CPU, %v early; want 2, 0.16, 0.5", n, ms, early)
	}
}

// TestChromiumLog checks that Config.ChromiumLog receives what V8 prints
// in the page's renderer with Config.JSFlags: the collections the page
// forces (gc, with --expose-gc) must show in it as --trace-gc's lines.
// Without the wiring the log stays empty, or holds only the browser's own
// messages.
func TestChromiumLog(t *testing.T) {
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cfg := Config{Chromium: chromium.Path(), JSFlags: "--trace-gc --expose-gc", ChromiumLog: log}
	b, err := startBrowser(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	tab, err := chromium.OpenTab(b.Context(), "about:blank")
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	// The renderer's stdout is a pipe, so V8's lines wait in stdio's buffer
	// until it fills: a hundred collections fill it many times over.
	if err := chromedp.Run(tab.Context(), chromedp.Evaluate(`for (let i = 0; i < 100; i++) gc(); true`, nil)); err != nil {
		t.Fatal(err)
	}
	// The allocator copies from that pipe: the lines come a moment later.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := os.ReadFile(log.Name())
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte("Mark-Compact")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Mark-Compact line from --trace-gc in Chromium's output:\n%s", out)
		}
	}
}
