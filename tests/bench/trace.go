package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"
)

// A round trip's tail is not where its CPU goes on average, which is what
// a sampling profile shows, but what else the machine did during the few
// slow ones. So the p99 is explained with a Chrome trace of a page as first
// opened: each round trip is a user-timing measure in it ("rt <variant>"),
// and the slowest are set against the engine's own work that overlapped
// them (wasm top-tier compiles, JavaScript's optimizing compiles, the main
// thread's garbage collections), beside the rest of the round trips and
// beside the raw client's.

// traceCategories are what the trace records: the measures, V8's and
// Blink's tasks, and the garbage collector's and wasm compiler's events.
var traceCategories = []string{
	"blink.user_timing", "toplevel", "v8", "v8.wasm", "disabled-by-default-v8.gc",
	"disabled-by-default-v8.compile",
}

// topTierEvent is V8's event for one batch of wasm functions compiled to
// its top tier (TurboFan).
const topTierEvent = "wasm.TopTierCompilation"

// rttMeasure prefixes the page's measure of one round trip; the variant
// follows it (bench.js, roundTrips).
const rttMeasure = "rt "

// traceEvent is one event of a Chrome trace, as much of it as is read.
type traceEvent struct {
	Name string  `json:"name"`
	Ph   string  `json:"ph"`
	TS   float64 `json:"ts"`   // µs
	Dur  float64 `json:"dur"`  // µs, for complete events ("X")
	TDur float64 `json:"tdur"` // µs of its thread's CPU, for complete events
	PID  int     `json:"pid"`
	TID  int     `json:"tid"`
}

// traced runs fn under a Chrome trace of the tab's renderer and returns
// the trace's events; raw, the trace as a JSON array, which DevTools'
// Performance panel and Perfetto open.
func (t *tab) traced(fn func() error) (events []traceEvent, raw []byte, err error) {
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(t.ctx) // the listener goes with it
	defer cancel()
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			mu.Lock()
			for _, v := range e.Value {
				buf.WriteByte(',')
				buf.Write(v)
			}
			mu.Unlock()
		case *tracing.EventTracingComplete:
			close(done)
		}
	})
	start := tracing.Start().WithTransferMode(tracing.TransferModeReportEvents).
		WithTraceConfig(&tracing.TraceConfig{RecordMode: tracing.RecordModeRecordContinuously, IncludedCategories: traceCategories})
	if err := t.run(start); err != nil {
		return nil, nil, err
	}
	ferr := fn()
	if err := t.run(tracing.End()); err != nil {
		return nil, nil, err
	}
	select {
	case <-done:
	case <-time.After(evalLimit): // a broken trace fails the run, as a broken page does
		return nil, nil, fmt.Errorf("the trace did not complete within %v of its end", evalLimit)
	}
	if ferr != nil {
		return nil, nil, ferr
	}
	mu.Lock()
	defer mu.Unlock()
	raw = append([]byte("["), bytes.TrimPrefix(buf.Bytes(), []byte(","))...)
	raw = append(raw, ']')
	if err := json.Unmarshal(raw, &events); err != nil {
		return nil, nil, fmt.Errorf("reading the trace: %w", err)
	}
	return events, raw, nil
}

// span is an interval of the trace clock, in µs.
type span struct{ from, to float64 }

func (s span) overlaps(o span) bool { return s.from < o.to && o.from < s.to }

// roundTripSpans pairs the trace's measures of variant's round trips,
// begin ("b") and end ("e") in the order they came, and returns them with
// the thread they ran on.
func roundTripSpans(events []traceEvent, variant string) (spans []span, pid, tid int) {
	name := rttMeasure + variant
	var open []float64
	for _, e := range events {
		if e.Name != name {
			continue
		}
		switch e.Ph {
		case "b":
			open = append(open, e.TS)
			pid, tid = e.PID, e.TID
		case "e":
			if len(open) > 0 {
				spans = append(spans, span{open[0], e.TS})
				open = open[1:]
			}
		}
	}
	return spans, pid, tid
}

// overlapKind is a kind of the engine's own work a slow round trip may have
// waited for: which events it is, and whether only the page's main thread's
// count (the garbage collector's pause) or any thread of the renderer's
// (compiles run on a pool of threads, which on two cores take a core).
type overlapKind struct {
	name     string
	mainOnly bool
	is       func(string) bool
}

var overlapKinds = []overlapKind{
	{"wasm top-tier compiles", false, func(n string) bool { return n == topTierEvent }},
	{"JavaScript optimizing compiles", false, func(n string) bool {
		return n == "V8.MaglevTask" || n == "V8.TurbofanTask" || n == "V8.OptimizeBackground"
	}},
	{"a main-thread garbage collection", true, func(n string) bool { return n == "MinorGC" || n == "MajorGC" }},
}

// tailReport is what overlapped the slowest round trips of one variant.
type tailReport struct {
	variant    string
	pid        int  // the renderer the round trips ran in
	window     span // from the first round trip's start to the last's end
	n, slow    int
	threshold  float64   // ms, the fastest of the slow ones
	slowShare  []float64 // per overlapKinds: the share of the slow ones it overlapped
	otherShare []float64 // … of the others
}

// tail sorts variant's round trips into the slowest share (at least one)
// and the rest, and says how many of each some work of each kind
// overlapped.
func tail(events []traceEvent, variant string, share float64) (tailReport, bool) {
	spans, pid, tid := roundTripSpans(events, variant)
	if len(spans) == 0 {
		return tailReport{}, false
	}
	byTime := slices.SortedFunc(slices.Values(spans), func(a, b span) int {
		return cmp.Compare(b.to-b.from, a.to-a.from) // slowest first
	})
	k := max(1, int(float64(len(spans))*share))
	r := tailReport{
		variant: variant, pid: pid, window: span{spans[0].from, spans[len(spans)-1].to},
		n: len(spans), slow: k, threshold: (byTime[k-1].to - byTime[k-1].from) / 1000,
	}
	for _, kind := range overlapKinds {
		var work []span
		for _, e := range events {
			if e.Ph == "X" && e.PID == pid && (!kind.mainOnly || e.TID == tid) && kind.is(e.Name) {
				work = append(work, span{e.TS, e.TS + e.Dur})
			}
		}
		r.slowShare = append(r.slowShare, overlappedShare(byTime[:k], work))
		r.otherShare = append(r.otherShare, overlappedShare(byTime[k:], work))
	}
	return r, true
}

// overlappedShare is the share of spans that some span of work overlaps.
func overlappedShare(spans, work []span) float64 {
	if len(spans) == 0 {
		return 0
	}
	n := 0
	for _, s := range spans {
		if slices.ContainsFunc(work, s.overlaps) {
			n++
		}
	}
	return float64(n) / float64(len(spans))
}

func (r tailReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s client: its slowest %s of %s round trips (≥ %.2f ms) overlapped ", r.variant, count(r.slow), count(r.n), r.threshold)
	for i, kind := range overlapKinds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f%% (the others %.0f%%)", kind.name, 100*r.slowShare[i], 100*r.otherShare[i])
	}
	return b.String()
}

// topTierCompiles sums the wasm top-tier compiles of the renderer pid
// within s: how many, their threads' CPU time (ms) and the share of it in
// the first quarter of s.
func topTierCompiles(events []traceEvent, pid int, s span) (n int, ms, firstQuarter float64) {
	quarter := s.from + (s.to-s.from)/4
	for _, e := range events {
		if e.Ph != "X" || e.PID != pid || e.Name != topTierEvent || !s.overlaps(span{e.TS, e.TS + e.Dur}) {
			continue
		}
		n++
		ms += e.TDur / 1000
		if e.TS < quarter {
			firstQuarter += e.TDur / 1000
		}
	}
	if ms > 0 {
		firstQuarter /= ms
	}
	return n, ms, firstQuarter
}
