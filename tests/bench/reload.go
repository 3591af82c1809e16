package bench

import "fmt"

// timeline is one reloaded page's load, in milliseconds since its
// navigation started (performance.timeOrigin), as bench.js measureReload
// reports it.
type timeline struct {
	Live           float64 `json:"live"` // the first replayed frame delivered
	Seq            float64 `json:"seq"`  // its seq
	LoadStart      float64 `json:"loadStart"`
	LoadEnd        float64 `json:"loadEnd"`        // loadRelay resolved
	AttachEnd      float64 `json:"attachEnd"`      // attach resolved: welcomed
	WasmFetchStart float64 `json:"wasmFetchStart"` // resource timing of relay.wasm
	WasmFetchEnd   float64 `json:"wasmFetchEnd"`
	InstantiateEnd float64 `json:"instantiateEnd"` // instantiateStreaming resolved
	RelayJS        bool    `json:"relayJS"`        // the page loaded relay.js
}

// wasmLate is relay.wasm on the main thread in a page without preload.js:
// its compile starts when bench.js calls loadRelay.
const wasmLate = "wasm-late"

// reloadKinds are the pages reloaded in turn: relay.wasm on the main thread
// (with preload.js and without) and in worker mode, and the raw client that
// keeps its attachment id and cursor in sessionStorage and resumes by hand,
// which is what a reload costs without relay.wasm.
var reloadKinds = []string{wasmIDB, wasmWorker, wasmLate, rawJS}

// reloads measures reload to live: two tabs, one per kind, reloaded in
// turn. Before each reload the page leaves frames undelivered on purpose
// (bench.js arm); the reloaded page resumes and the first frame replayed is
// live.
func (s *session) reloads() ([]Row, error) {
	n := s.cfg.Sizes.Reloads
	s.cfg.logf("reload to live: %d reloads per page", n)
	tabs := map[string]*tab{}
	for _, kind := range reloadKinds {
		page := wasmPage
		if kind == rawJS || kind == wasmLate {
			page = noPreloadPage
		}
		t, err := s.openPage(page)
		if err != nil {
			return nil, err
		}
		if err := t.call(nil, "arm", kind); err != nil {
			return nil, err
		}
		tabs[kind] = t
	}
	got := map[string][]timeline{}
	var floor []moduleCost
	for range n {
		for _, kind := range reloadKinds {
			tl, err := reloadOnce(tabs[kind], kind)
			if err != nil {
				return nil, err
			}
			got[kind] = append(got[kind], tl)
		}
		var c moduleCost
		if err := tabs[rawJS].call(&c, "moduleBytes"); err != nil {
			return nil, err
		}
		floor = append(floor, c)
	}
	for _, t := range tabs {
		if err := t.call(nil, "stopReloads"); err != nil {
			return nil, err
		}
		if err := t.healthy(); err != nil {
			return nil, err
		}
	}
	return append(reloadRows(got[wasmIDB], got[wasmWorker], got[wasmLate], got[rawJS]), floorRows(floor)...), nil
}

// moduleCost is what relay.wasm costs a page before any of relay.js runs,
// in milliseconds, as bench.js moduleBytes measures it.
type moduleCost struct {
	Fetch   float64 `json:"fetch"`   // fetch → arrayBuffer, revalidated and read from the HTTP cache
	Compile float64 `json:"compile"` // WebAssembly.compile of those bytes
}

// reloadBudget is what the reload target allows over the raw client.
const reloadBudget = 40.0

// floorRows set relay.wasm's bytes beside the reload target's budget: what
// its fetch and compile cost on their own, in a page doing nothing else,
// is a floor no change to relay.js or the engine goes under.
func floorRows(floor []moduleCost) []Row {
	budget := make([]float64, len(floor))
	fetches, compiles := make([]float64, len(floor)), make([]float64, len(floor))
	for i, c := range floor {
		budget[i], fetches[i], compiles[i] = reloadBudget, c.Fetch, c.Compile
	}
	base := fmt.Sprintf("the target's %.0f ms over raw", reloadBudget)
	return []Row{
		paired("… floor: relay.wasm's bytes alone (fetch → arrayBuffer as a reload gets them), in an idle page", "ms", base, fetches, budget),
		paired("… floor: compiling those bytes (WebAssembly.compile), in an idle page", "ms", base, compiles, budget),
	}
}

// reloadOnce reloads an armed tab, reads its timeline and arms it again.
func reloadOnce(t *tab, kind string) (timeline, error) {
	var tl timeline
	if err := t.reload(); err != nil {
		return tl, err
	}
	if err := t.call(&tl, "reloaded"); err != nil {
		return tl, err
	}
	if tl.Seq <= 0 {
		return tl, fmt.Errorf("%s reload: the first frame delivered was not a replayed one (seq %v)", kind, tl.Seq)
	}
	if kind == rawJS && tl.RelayJS {
		return tl, fmt.Errorf("raw reload: the page loaded relay.js, so the baseline would include loading it")
	}
	return tl, t.call(nil, "arm", kind)
}

func reloadRows(wasm, worker, late, raw []timeline) []Row {
	pick := func(tls []timeline, f func(timeline) float64) []float64 {
		out := make([]float64, len(tls))
		for i, tl := range tls {
			out[i] = f(tl)
		}
		return out
	}
	live := func(tl timeline) float64 { return tl.Live }
	total := pick(wasm, live)
	live2 := paired(fmt.Sprintf("Chromium reload to live (navigation start → first replayed frame), median of %d", len(wasm)),
		"ms", "raw JS WebSocket, cursor in sessionStorage", total, pick(raw, live))
	live2.Target = &Target{Text: "≤ baseline + 40 ms (and < 200 ms)", Met: func(r Row) bool { return r.Value-r.Baseline <= 40 && r.Value < 200 }}
	live2.why = (*prober).whyReload
	inWorker := paired(fmt.Sprintf("Chromium reload to live, worker mode, median of %d", len(worker)),
		"ms", "raw JS WebSocket, cursor in sessionStorage", pick(worker, live), pick(raw, live))
	withoutPreload := paired(fmt.Sprintf("Chromium reload to live, no preload.js (compile started by loadRelay), median of %d", len(late)),
		"ms", "reload to live with preload.js", pick(late, live), total)
	part := func(name string, f func(timeline) float64) Row {
		return paired("… of which "+name, "ms", "reload to live", pick(wasm, f), total)
	}
	return []Row{
		live2,
		withoutPreload,
		inWorker,
		part("navigation → bench page running (unload, HTML, bench.js)", func(tl timeline) float64 { return tl.LoadStart }),
		paired("… the same for the raw page (its unload has no relay.wasm to end)", "ms", "relay.wasm page's",
			pick(raw, func(tl timeline) float64 { return tl.LoadStart }), pick(wasm, func(tl timeline) float64 { return tl.LoadStart })),
		part("fetching + instantiating relay.wasm", func(tl timeline) float64 { return tl.InstantiateEnd - tl.WasmFetchStart }),
		part("loadRelay (relay.js, wasm_exec.js, relay.wasm, Go start, store open)", func(tl timeline) float64 { return tl.LoadEnd - tl.LoadStart }),
		part("attach (Web Lock, dial, hello → welcome)", func(tl timeline) float64 { return tl.AttachEnd - tl.LoadEnd }),
		part("welcome → first replayed frame delivered", func(tl timeline) float64 { return tl.Live - tl.AttachEnd }),
	}
}
