package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// wasmBuildFlags are `make wasm`'s: its WASM_FLAGS (the packages off the
// hot path built without inlining), read from the Makefile so the baseline
// is built as the module is, and its -ldflags.
func wasmBuildFlags(ctx context.Context, root string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "make", "-s", "--no-print-directory", "-C", root, "wasm-flags").Output()
	if err != nil {
		return nil, fmt.Errorf("reading the Makefile's WASM_FLAGS (make wasm-flags): %w", err)
	}
	return append(strings.Fields(string(out)), "-ldflags=-s -w"), nil
}

// encoding is a way a server would send relay.wasm: name, and the
// compressor command (nil: as is).
type encoding struct {
	name string
	cmd  []string
}

// encodings are how a server would send relay.wasm: as is, or through the
// compressor command (the file name is appended); brotli at the quality
// Sizes.BrotliQuality says.
func encodings(brotli int) []encoding {
	q := strconv.Itoa(brotli)
	return []encoding{
		{"raw", nil},
		{"gzip -9", []string{"gzip", "-9", "-c"}},
		{"brotli -q " + q, []string{"brotli", "-q", q, "-c"}},
	}
}

// The size target and goal for relay.wasm under gzip.
const (
	gzipTarget = 1_000_000
	gzipGoal   = 700_000
)

// sizeFigures makes figure (6): relay.wasm raw and compressed, beside a
// Go fmt hello world built the same way (the floor of any Go wasm module).
func sizeFigures(ctx context.Context, cfg Config, tmp string) ([]Row, error) {
	cfg.logf("sizes: relay.wasm and a Go hello world")
	module := filepath.Join(cfg.ModuleDir, "relay.wasm")
	hello := filepath.Join(tmp, "hello.wasm")
	flags, err := wasmBuildFlags(ctx, cfg.Root)
	if err != nil {
		return nil, err
	}
	if err := buildWasm(ctx, cfg.Root, "./tests/bench/hellowasm", hello, flags...); err != nil {
		return nil, err
	}
	rows := []Row{}
	for _, enc := range encodings(cfg.Sizes.BrotliQuality) {
		m, err := encodedSize(ctx, module, enc.cmd)
		if err != nil {
			return nil, err
		}
		h, err := encodedSize(ctx, hello, enc.cmd)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{
			Figure: "relay.wasm, " + enc.name, Unit: "B", Value: float64(m),
			Baseline: float64(h), BaseName: "Go fmt hello world", Ratio: float64(m) / float64(h),
		})
	}
	gz := &rows[1]
	gz.Target = atMost(gzipTarget, "≤ 1.0 MB (goal 700 KB)")
	gz.why = (*prober).whySize
	gz.Note = "goal 700 KB met"
	if over := int(gz.Value) - gzipGoal; over > 0 {
		gz.Note = "goal 700 KB: " + count(over) + " B over"
	}
	return rows, nil
}

// buildWasm builds pkg for GOOS=js GOARCH=wasm into out.
func buildWasm(ctx context.Context, root, pkg, out string, flags ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for wasm: %w\n%s", pkg, err, msg)
	}
	return nil
}

// encodedSize is the size of file, through the compressor cmd when set.
func encodedSize(ctx context.Context, file string, cmd []string) (int, error) {
	if cmd == nil {
		st, err := os.Stat(file)
		if err != nil {
			return 0, err
		}
		return int(st.Size()), nil
	}
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], file)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w: %s", cmd[0], file, err, stderr.Bytes())
	}
	return len(out), nil
}
