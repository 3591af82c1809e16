package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/chromedp"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// A figure that misses its target is explained by a profile, not a guess:
// the DevTools sampling profiler for the browser figures (on a relay.wasm
// built with its function names), pprof for the native ones, and wasmsize
// (tests/tools/wasmsize) for the module's size. The top frames go to
// Config.Log; the profiles themselves to Config.ProfileDir (.cpuprofile
// files open in Chromium's DevTools, .pprof in go tool pprof).

// topFrames is how many frames of a profile are reported.
const topFrames = 15

// prober builds what the profiles need once: a module with function names,
// and a browser session serving it.
type prober struct {
	ctx   context.Context
	cfg   Config
	tmp   string
	named string   // the module directory with function names, once built
	sess  *session // on the named module, once opened
}

// What Config.Profile asks for.
const (
	ProfileNone   = ""
	ProfileMissed = "missed" // the figures that missed their target
	ProfileAll    = "all"    // every figure that has a target
)

// profile explains the rows cfg.Profile asks for (those that can be
// explained).
func profile(ctx context.Context, cfg Config, rows []Row, tmp string) error {
	p := &prober{ctx: ctx, cfg: cfg, tmp: tmp}
	defer p.close()
	for _, r := range rows {
		if r.why == nil || r.Target == nil || (cfg.Profile == ProfileMissed && r.Target.Met(r)) {
			continue
		}
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return err
		}
		cfg.logf("profiling %q (target %s):", r.Figure, r.Target.Text)
		report, err := r.why(p)
		if err != nil {
			return fmt.Errorf("profiling %q: %w", r.Figure, err)
		}
		cfg.logf("%s", report)
	}
	return nil
}

func (p *prober) close() {
	if p.sess != nil {
		p.sess.close()
	}
}

// namedModule builds relay.wasm without -ldflags=-s, which strips the
// function names a profile needs, beside the module's JavaScript.
func (p *prober) namedModule() (string, error) {
	if p.named != "" {
		return p.named, nil
	}
	dir := filepath.Join(p.tmp, "named-module")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := buildWasm(p.ctx, p.cfg.Root, "./wasm", filepath.Join(dir, "relay.wasm"), "-trimpath"); err != nil {
		return "", err
	}
	for _, f := range stack.ModuleFiles {
		if f == "relay.wasm" {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(p.cfg.ModuleDir, f)); err == nil {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				return "", err
			}
		}
	}
	p.named = dir
	return dir, nil
}

// session is a browser on a stack serving the named module, set up as for
// the measurements.
func (p *prober) session() (*session, error) {
	if p.sess != nil {
		return p.sess, nil
	}
	dir, err := p.namedModule()
	if err != nil {
		return nil, err
	}
	s, err := p.open(dir, "profiling")
	if err != nil {
		return nil, err
	}
	p.sess = s
	return s, nil
}

// open starts a browser on a stack serving the module in dir, set up as
// for the measurements, with its files under the folder name of p.tmp.
func (p *prober) open(dir, name string) (*session, error) {
	tmp := filepath.Join(p.tmp, name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	s, err := openSession(p.ctx, p.cfg, dir, tmp)
	if err == nil {
		err = s.setup()
	}
	if err != nil {
		if s != nil {
			s.close()
		}
		return nil, err
	}
	return s, nil
}

// compare profiles fn for relay.wasm and then for the raw WebSocket, and
// reports the top frames of each.
func (p *prober) compare(name string, fn func(s *session, variant string) error) (string, error) {
	return p.compareVariant(name, wasmIDB, fn)
}

// compareVariant is compare with the relay.wasm variant named.
func (p *prober) compareVariant(name, wasm string, fn func(s *session, variant string) error) (string, error) {
	s, err := p.session()
	if err != nil {
		return "", err
	}
	var out strings.Builder
	for _, v := range []string{wasm, rawJS} {
		prof, err := s.tab.cpuProfile(func() error { return fn(s, v) })
		if err != nil {
			return "", err
		}
		file := filepath.Join(p.cfg.ProfileDir, name+"-"+v+".cpuprofile")
		if err := saveJSON(file, prof); err != nil {
			return "", err
		}
		fmt.Fprintf(&out, "%s, %s client (%s), %s:\n%s", name, v, file, busyText(prof), top(prof, topFrames))
	}
	return out.String(), nil
}

func (p *prober) whyInbound() (string, error) {
	return p.compare("inbound", func(s *session, v string) error {
		_, err := s.stream(v, s.cfg.Sizes.Frames)
		return err
	})
}

// whyTranscript profiles the inbound stream of a client that keeps a
// transcript (history on), beside the raw WebSocket's.
func (p *prober) whyTranscript() (string, error) {
	return p.compareVariant("inbound-transcript", wasmLog, func(s *session, v string) error {
		_, err := s.stream(v, s.cfg.Sizes.Frames)
		return err
	})
}

// whyReload profiles one reload of a relay.wasm page, from before the
// navigation to the first replayed frame.
func (p *prober) whyReload() (string, error) {
	s, err := p.session()
	if err != nil {
		return "", err
	}
	t, err := s.openPage(wasmPage)
	if err == nil {
		err = t.call(nil, "arm", wasmIDB)
	}
	if err != nil {
		return "", err
	}
	defer t.call(nil, "stopReloads")
	prof, err := t.cpuProfile(func() error {
		_, err := reloadOnce(t, wasmIDB)
		return err
	})
	if err != nil {
		return "", err
	}
	file := filepath.Join(p.cfg.ProfileDir, "reload-wasm.cpuprofile")
	if err := saveJSON(file, prof); err != nil {
		return "", err
	}
	return fmt.Sprintf("reload, relay.wasm page (%s), %s:\n%s", file, busyText(prof), top(prof, topFrames)), nil
}

func (p *prober) whyRoundTrip() (string, error) {
	return p.compare("roundtrip", func(s *session, v string) error {
		return s.tab.call(nil, "roundTrips", v, s.cfg.Sizes.RoundTrips)
	})
}

// whyRoundTripTail traces the first-load round trips in a browser of its
// own (the round trips of the other figures' profiles would have had V8
// compile what the first ones compile) and reports what overlapped the
// slowest 1% of each client's, and how much of relay.wasm V8 compiled to
// its top tier meanwhile.
func (p *prober) whyRoundTripTail() (string, error) {
	s, err := p.open(p.cfg.ModuleDir, "tracing")
	if err != nil {
		return "", err
	}
	defer s.close()
	events, raw, err := s.tab.traced(func() error {
		_, err := s.roundTripSample(s.cfg.Sizes.RoundTrips, true)
		return err
	})
	if err != nil {
		return "", err
	}
	file := filepath.Join(p.cfg.ProfileDir, "roundtrip-first-load.trace.json")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		return "", err
	}
	var out strings.Builder
	fmt.Fprintf(&out, "round trips of a page as first opened, traced (%s):\n", file)
	var wasm tailReport
	for _, v := range []string{wasmIDB, rawJS} {
		r, ok := tail(events, v, 0.01)
		if !ok {
			return "", fmt.Errorf("the trace has no measure of the %s client's round trips", v)
		}
		if v == wasmIDB {
			wasm = r
		}
		fmt.Fprintf(&out, "  %s\n", r)
	}
	n, ms, early := topTierCompiles(events, wasm.pid, wasm.window)
	fmt.Fprintf(&out, "  meanwhile V8 compiled %d batches of relay.wasm's functions to its top tier, %.0f ms of its threads' CPU, %.0f%% of it in the first quarter of the round trips", n, ms, 100*early)
	return out.String(), nil
}

// cpuProfile runs fn under the DevTools sampling profiler (100 µs).
func (t *tab) cpuProfile(fn func() error) (*profiler.Profile, error) {
	if err := t.run(profiler.Enable(), profiler.SetSamplingInterval(100), profiler.Start()); err != nil {
		return nil, err
	}
	ferr := fn()
	var prof *profiler.Profile
	err := t.run(chromedp.ActionFunc(func(ctx context.Context) (err error) {
		prof, err = profiler.Stop().Do(ctx)
		return err
	}), profiler.Disable())
	if ferr != nil {
		return nil, ferr
	}
	return prof, err
}

// busy is how long the page's main thread was not idle during a profile,
// and how long the profile ran, in milliseconds. Each sample stands for the
// interval that ends at it.
func busy(prof *profiler.Profile) (busyMS, totalMS float64) {
	idle := map[int64]bool{}
	for _, node := range prof.Nodes {
		idle[node.ID] = node.CallFrame.FunctionName == "(idle)"
	}
	var busyUS, totalUS int64
	for i, id := range prof.Samples {
		if i < len(prof.TimeDeltas) {
			totalUS += prof.TimeDeltas[i]
			if !idle[id] {
				busyUS += prof.TimeDeltas[i]
			}
		}
	}
	return float64(busyUS) / 1000, float64(totalUS) / 1000
}

func busyText(prof *profiler.Profile) string {
	b, t := busy(prof)
	return fmt.Sprintf("main thread busy %.0f of %.0f ms", b, t)
}

// top lists where a profile's samples were on top of the stack (self
// time), as a share of all samples: by area (a Go package of relay.wasm, a
// script, a browser built-in) and by function.
func top(prof *profiler.Profile, n int) string {
	funcs, areas := map[string]int{}, map[string]int{}
	frames := map[int64]*profiler.ProfileNode{}
	for _, node := range prof.Nodes {
		frames[node.ID] = node
	}
	for _, id := range prof.Samples {
		fn, area := frameName(frames[id])
		funcs[fn]++
		areas[area]++
	}
	return "  by area:\n" + shares(areas, len(prof.Samples), n) + "  by function:\n" + shares(funcs, len(prof.Samples), n)
}

// shares lists the n largest counts as shares of total.
func shares(counts map[string]int, total, n int) string {
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	var out strings.Builder
	for _, name := range names[:min(n, len(names))] {
		fmt.Fprintf(&out, "  %5.1f%%  %s\n", 100*float64(counts[name])/float64(total), name)
	}
	return out.String()
}

// goPackage finds the package in a function name as Go's linker spells it
// in wasm ("github.com_relaywasm_relaywasm_librelay.__scanner_.str").
var goPackage = regexp.MustCompile(`^((?:[a-z0-9-]+\.[a-z]+_)?[^.]+)\.`)

// frameName is a sample's function and its area: a wasm function by its Go
// name and package, a script's by file and line, a browser built-in or a
// pseudo-frame ((program), (garbage collector), (idle)) by its name.
func frameName(node *profiler.ProfileNode) (fn, area string) {
	cf := node.CallFrame
	name := cmp.Or(cf.FunctionName, "(anonymous)")
	switch {
	case strings.HasSuffix(cf.URL, ".wasm") || strings.HasPrefix(cf.URL, "wasm://"):
		pkg := name
		if m := goPackage.FindStringSubmatch(name); m != nil {
			pkg = m[1]
		}
		return name + " [wasm]", "Go " + pkg + " [wasm]"
	case cf.URL == "" && strings.HasPrefix(name, "("):
		return name, name
	case cf.URL == "":
		return name, "built-in " + name
	default:
		file := filepath.Base(cf.URL)
		return fmt.Sprintf("%s %s:%d", name, file, cf.LineNumber+1), file
	}
}

func saveJSON(file string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// whySize lists what relay.wasm's code is made of, by package.
func (p *prober) whySize() (string, error) {
	dir, err := p.namedModule()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(p.ctx, "go", "run", "./tests/tools/wasmsize", "-top", fmt.Sprint(topFrames), "-funcs", "10",
		filepath.Join(dir, "relay.wasm"))
	cmd.Dir = p.cfg.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("wasmsize: %w\n%s", err, out)
	}
	return "relay.wasm by package and function (wasmsize):\n" + string(out), nil
}

// whyNative runs one native benchmark again under pprof: a CPU profile, or
// with memory set the allocations (the heap figure is measured while the
// benchmark runs, so its in-use heap at exit would show nothing).
func (p *prober) whyNative(gb goBench, name string, memory bool) (string, error) {
	kind, flag, index := "cpu", "-cpuprofile", "-sample_index=cpu"
	if memory {
		kind, flag, index = "mem", "-memprofile", "-sample_index=alloc_space"
	}
	base := filepath.Join(p.cfg.ProfileDir, strings.ReplaceAll(name, "/", "-")+"."+kind)
	bin := filepath.Join(p.tmp, filepath.Base(gb.pkg)+".test")
	test := exec.CommandContext(p.ctx, "go", "test", "-run", "^$", "-bench", exactBench(name),
		"-benchtime", gb.benchtime(p.cfg.Sizes), "-o", bin, flag, base+".pprof", gb.pkg)
	test.Dir = p.cfg.Root
	if out, err := test.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	show := exec.CommandContext(p.ctx, "go", "tool", "pprof", "-top", "-cum", index, fmt.Sprintf("-nodecount=%d", topFrames), bin, base+".pprof")
	show.Dir = p.cfg.Root
	out, err := show.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pprof %s: %w\n%s", name, err, out)
	}
	return fmt.Sprintf("%s, %s profile (%s.pprof):\n%s", name, kind, base, out), nil
}

// exactBench is a -bench pattern matching name and nothing else.
func exactBench(name string) string {
	parts := strings.Split(name, "/")
	for i, part := range parts {
		parts[i] = "^" + part + "$"
	}
	return strings.Join(parts, "/")
}
