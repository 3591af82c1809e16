package bench

import (
	"fmt"
	"time"
)

// rttBlock is how many round trips each client makes before the other takes
// over: short blocks pair the two against the same moment of the machine.
const rttBlock = 50

// rttSettle is how long the page is left alone between its first round
// trips and its reload, as a user between using a page and reloading it:
// the engine finishes in the background what the first ones started.
const rttSettle = 3 * time.Second

// rttSample is one measurement of the round trips: each round trip's time
// (ms) and the main thread's µs per round trip, block by block, per client.
type rttSample struct{ ms, cpu map[string][]float64 }

// roundTrips times sendACP of the dev agent's echo request to its response
// in onMessage, and the same through the raw WebSocket, in alternating
// blocks after a warm-up: first in the page as the session opened it, then
// in the same page reloaded after a pause.
//
// The two differ in relay.wasm's tail. In a browser just started, the
// slow round trips (2–10 ms where the rest take 0.6) crowd into the first
// few hundred and thin out over the next thousand, and they fall on the
// same round-trip numbers run after run, with GOGC=off too: one-time work
// set off by counts, as V8's tier-up budgets are. With V8's tiering off
// for wasm and JavaScript (-js-flags) fewer remain, and the rest is the
// page's CPU per round trip on two cores shared with the relay and the
// runtime (README, "Round trip"). The reloaded page is the steady state a
// page reaches after use; with Chromium's wasm code cache and V8's module
// cache switched off its tail was much the same.
func (s *session) roundTrips() ([]Row, error) {
	n := s.cfg.Sizes.RoundTrips
	s.cfg.logf("round trips: %d per client, on the first load and after a reload", n)
	first, err := s.roundTripSample(n, false)
	if err != nil {
		return nil, err
	}
	time.Sleep(rttSettle)
	if err := s.reloadMain(); err != nil {
		return nil, err
	}
	again, err := s.roundTripSample(n, false)
	if err != nil {
		return nil, err
	}
	return append(first.rows("first load, ", true), again.rows("reloaded page, ", false)...), nil
}

// roundTripSample measures n round trips per client after a warm-up of
// one block; with mark, each measured round trip (not the warm-up's) is
// also a measure in the page's trace (trace.go).
func (s *session) roundTripSample(n int, mark bool) (rttSample, error) {
	var r rttSample
	for i, count := range []int{min(n, rttBlock), n} { // the warm-up, then the measurement
		r = rttSample{ms: map[string][]float64{}, cpu: map[string][]float64{}}
		for done := 0; done < count; done += rttBlock {
			for _, v := range []string{wasmIDB, wasmWorker, rawJS} {
				var block []float64
				before, err := s.tab.cpuTime()
				if err == nil {
					err = s.tab.call(&block, "roundTrips", v, min(rttBlock, count-done), mark && i == 1)
				}
				if err != nil {
					return r, err
				}
				after, err := s.tab.cpuTime()
				if err != nil {
					return r, err
				}
				r.ms[v] = append(r.ms[v], block...)
				r.cpu[v] = append(r.cpu[v], after.minus(before).thread*1e6/float64(len(block)))
			}
		}
	}
	return r, nil
}

// reloadMain reloads the session's page and attaches its clients again, as
// a reloaded page of an app would.
func (s *session) reloadMain() error {
	if err := s.tab.reload(); err != nil {
		return err
	}
	if err := s.prepare(s.tab); err != nil {
		return fmt.Errorf("reloaded page: %w", err)
	}
	return s.setup()
}

// rows are the sample's figures; phase prefixes their names, and explain
// says whether a missed p50 or p99 is explained (one phase is: p50 by a
// profile, p99 by a trace).
func (r rttSample) rows(phase string, explain bool) []Row {
	// The targets (p50 and p99 within 1 ms of raw) are the default
	// mode's, the main thread's. Worker mode adds a postMessage hop each way
	// so that the page's thread is free: its targets are page CPU and
	// inbound, and its round trips are reported beside them.
	mainThread := rttRows(phase, r.ms[wasmIDB], r.ms[rawJS])
	for i := range mainThread {
		mainThread[i].Target = withinOf(1, "≤ baseline + 1 ms")
	}
	if explain {
		mainThread[0].why = (*prober).whyRoundTrip // it profiles the main thread's client
		mainThread[1].why = (*prober).whyRoundTripTail
	}
	rows := append(mainThread, rttRows(phase+"worker mode, ", r.ms[wasmWorker], r.ms[rawJS])...)
	// The round trip's time is mostly waiting; what relay.wasm costs the
	// page is steadier to compare as main-thread CPU, block by block.
	return append(rows,
		paired("Chromium round trip, "+phase+"page main thread CPU per round trip", "µs", "raw JS WebSocket", r.cpu[wasmIDB], r.cpu[rawJS]),
		paired("Chromium round trip, "+phase+"worker mode, page main thread CPU per round trip", "µs", "raw JS WebSocket", r.cpu[wasmWorker], r.cpu[rawJS]),
	)
}

// rttRows reports p50 and p99 of the two distributions, with no target;
// the ratio is of the percentiles (the round trips are not paired one by
// one). mode prefixes the figures' names.
func rttRows(mode string, wasm, raw []float64) []Row {
	row := func(p float64, name string) Row {
		v, b := percentile(wasm, p), percentile(raw, p)
		return Row{
			Figure:   "Chromium round trip sendACP → onMessage (echo), " + mode + name + " of " + count(len(wasm)),
			Unit:     "ms",
			Value:    v,
			Baseline: b,
			BaseName: "raw JS WebSocket",
			Ratio:    v / b,
		}
	}
	return []Row{row(50, "p50"), row(99, "p99")}
}
