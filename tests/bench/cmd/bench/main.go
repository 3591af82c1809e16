// Command bench is `make bench`: it measures every figure of issue 7 beside
// its baseline (package bench) and prints one markdown table on stdout;
// progress, and profiles of the figures that miss their target, go to
// stderr.
//
//	go run ./tests/bench/cmd/bench [-module dist] [-smoke] [-profile missed|all|none]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/relaywasm/relaywasm/tests/bench"
)

func main() {
	module := flag.String("module", "", "directory of relay.wasm, relay.js and wasm_exec.js (default: the module's dist/)")
	chromium := flag.String("chromium", "/usr/bin/chromium", "Chromium's executable")
	smoke := flag.Bool("smoke", false, "tiny sizes: check the harness, measure nothing worth reading")
	profile := flag.String("profile", bench.ProfileMissed, "explain figures with a profile: missed (those that miss their target), all (every figure with a target) or none")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *module, *chromium, *smoke, *profile); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, module, chromium string, smoke bool, profile string) error {
	if profile == "none" {
		profile = bench.ProfileNone
	}
	root, err := bench.ModuleRoot(".")
	if err != nil {
		return err
	}
	cfg := bench.Config{
		Root: root, ModuleDir: module, Chromium: chromium, Sizes: bench.Full(),
		Profile: profile, ProfileDir: filepath.Join(root, "tests", "bench", "out"), Log: os.Stderr,
	}
	if cfg.ModuleDir == "" {
		cfg.ModuleDir = filepath.Join(root, "dist")
	}
	if smoke {
		cfg.Sizes = bench.Smoke()
	}
	rows, err := bench.Run(ctx, cfg)
	bench.Render(os.Stdout, rows)
	return err
}
