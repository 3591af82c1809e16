package bench

// rttBlock is how many round trips each client makes before the other takes
// over: short blocks pair the two against the same moment of the machine.
const rttBlock = 50

// roundTrips times sendACP of the dev agent's echo request to its response
// in onMessage, and the same through the raw WebSocket, in alternating
// blocks after a warm-up.
func (s *session) roundTrips() ([]Row, error) {
	n := s.cfg.Sizes.RoundTrips
	s.cfg.logf("round trips: %d per client", n)
	// ms: each round trip's time; cpu: main-thread µs per round trip, per block.
	var ms, cpu map[string][]float64
	for _, count := range []int{min(n, rttBlock), n} { // the warm-up, then the measurement
		ms, cpu = map[string][]float64{}, map[string][]float64{}
		for done := 0; done < count; done += rttBlock {
			for _, v := range []string{wasmIDB, wasmWorker, rawJS} {
				var block []float64
				before, err := s.tab.cpuTime()
				if err == nil {
					err = s.tab.call(&block, "roundTrips", v, min(rttBlock, count-done))
				}
				if err != nil {
					return nil, err
				}
				after, err := s.tab.cpuTime()
				if err != nil {
					return nil, err
				}
				ms[v] = append(ms[v], block...)
				cpu[v] = append(cpu[v], after.minus(before).thread*1e6/float64(len(block)))
			}
		}
	}
	rows := rttRows("", ms[wasmIDB], ms[rawJS])
	rows = append(rows, rttRows("worker mode, ", ms[wasmWorker], ms[rawJS])...)
	// The round trip's time is mostly waiting; what relay.wasm costs the
	// page is steadier to compare as main-thread CPU, block by block.
	return append(rows,
		paired("Chromium round trip, page main thread CPU per round trip", "µs", "raw JS WebSocket", cpu[wasmIDB], cpu[rawJS]),
		paired("Chromium round trip, worker mode, page main thread CPU per round trip", "µs", "raw JS WebSocket", cpu[wasmWorker], cpu[rawJS]),
	), nil
}

// rttRows reports percentiles of the two distributions; the ratio is of the
// percentiles (the round trips are not paired one by one). mode prefixes
// the figures' names.
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
	p50 := row(50, "p50")
	p50.Target = withinOf(1, "≤ baseline + 1 ms")
	if mode == "" {
		p50.why = (*prober).whyRoundTrip // it profiles the main thread's client
	}
	p99 := row(99, "p99")
	p99.Target = withinOf(1, "≤ baseline + 1 ms")
	return []Row{p50, p99}
}
