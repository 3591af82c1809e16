package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		"to browsers", "to runtime", "idle browser attachment", "gzip", "brotli",
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
