// Command bench is `make bench`: it measures every figure of issue 7 beside
// its baseline (package bench) and prints one markdown table on stdout;
// progress, and profiles of the figures that miss their target, go to
// stderr.
//
//	go run ./tests/bench/cmd/bench [-module dist] [-smoke] [-profile missed|all|none]
//		[-only inbound,roundtrip,reload,native,size] [-streams n] [-round-trips n]
//
// -only measures some figures and not the rest (the browser's alone take
// about a minute instead of the table's few), for iterating on one part;
// the table `make bench` prints is the whole one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/relaywasm/relaywasm/tests/bench"
)

func main() {
	module := flag.String("module", "", "directory of relay.wasm, relay.js and wasm_exec.js (default: the module's dist/)")
	chromium := flag.String("chromium", "/usr/bin/chromium", "Chromium's executable")
	smoke := flag.Bool("smoke", false, "tiny sizes: check the harness, measure nothing worth reading")
	profile := flag.String("profile", bench.ProfileMissed, "explain figures with a profile: missed (those that miss their target), all (every figure with a target) or none")
	only := flag.String("only", "", "measure only these figures, comma separated: "+strings.Join(bench.Figures, ", ")+" (default: all)")
	streams := flag.Int("streams", 0, "inbound streams per variant (default: the full size's)")
	roundTrips := flag.Int("round-trips", 0, "round trips per client (default: the full size's)")
	jsFlags := flag.String("js-flags", "", "V8 flags for Chromium (--js-flags), for an experiment on the engine: the table then says they were set")
	chromiumLog := flag.String("chromium-log", "", "write Chromium's output (stdout and stderr of all its processes, where V8's --trace-gc prints) to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := options{module: *module, chromium: *chromium, smoke: *smoke, profile: *profile, streams: *streams, roundTrips: *roundTrips, jsFlags: *jsFlags, chromiumLog: *chromiumLog}
	if *only != "" {
		o.only = strings.Split(*only, ",")
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	module, chromium, profile string
	jsFlags                   string // -js-flags
	chromiumLog               string // -chromium-log
	smoke                     bool
	only                      []string // -only, split
	streams, roundTrips       int      // 0: the size's own
}

func run(ctx context.Context, o options) error {
	if o.profile == "none" {
		o.profile = bench.ProfileNone
	}
	if err := bench.CheckFigures(o.only); err != nil {
		return err
	}
	root, err := bench.ModuleRoot(".")
	if err != nil {
		return err
	}
	cfg := bench.Config{
		Root: root, ModuleDir: o.module, Chromium: o.chromium, Sizes: bench.Full(), Only: o.only,
		JSFlags: o.jsFlags, Profile: o.profile, ProfileDir: filepath.Join(root, "tests", "bench", "out"), Log: os.Stderr,
	}
	if o.chromiumLog != "" {
		f, err := os.Create(o.chromiumLog)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.ChromiumLog = f
	}
	if cfg.ModuleDir == "" {
		cfg.ModuleDir = filepath.Join(root, "dist")
	}
	if o.smoke {
		cfg.Sizes = bench.Smoke()
	}
	if o.streams > 0 {
		cfg.Sizes.Streams = o.streams
	}
	if o.roundTrips > 0 {
		cfg.Sizes.RoundTrips = o.roundTrips
	}
	rows, err := bench.Run(ctx, cfg)
	bench.Render(os.Stdout, rows)
	if o.jsFlags != "" {
		fmt.Printf("\nChromium ran with --js-flags=%q: these are not the figures of a user's Chromium.\n", o.jsFlags)
	}
	return err
}
