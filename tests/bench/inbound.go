package bench

import "fmt"

// The page's inbound clients (bench.js setup): the raw WebSocket baseline
// and relay.wasm three ways.
const (
	rawJS      = "raw"        // a bare WebSocket, JSON.parse per message
	wasmIDB    = "wasm"       // relay.wasm as an app uses it: cursor in IndexedDB
	wasmMemory = "memory"     // the cursor off: the store in memory
	wasmLog    = "transcript" // IndexedDB with a transcript (history) on
)

var inboundVariants = []string{rawJS, wasmIDB, wasmMemory, wasmLog}

// streamResult is one timed stream (bench.js stream).
type streamResult struct {
	MS     float64 `json:"ms"`
	Frames int     `json:"frames"`
	Bytes  int     `json:"bytes"` // wire bytes; counted by the raw client only
}

func (r streamResult) framesPerSec() float64 { return float64(r.Frames) / (r.MS / 1000) }

// inbound streams the same prompt to each variant in turn, the order
// rotating every repetition so that none always runs first or after the
// same neighbour, after one short stream each to warm up (JIT tiers, the
// store's database, the relay's buffers).
func (s *session) inbound() ([]Row, error) {
	z := s.cfg.Sizes
	s.cfg.logf("inbound: %d streams of %d × %d B per variant", z.Streams, z.Frames, z.FrameBytes)
	for _, v := range inboundVariants {
		if _, err := s.stream(v, max(z.Frames/10, 2)); err != nil {
			return nil, err
		}
	}
	res := map[string][]streamResult{}
	for rep := range z.Streams {
		for i := range inboundVariants {
			v := inboundVariants[(rep+i)%len(inboundVariants)]
			r, err := s.stream(v, z.Frames)
			if err != nil {
				return nil, err
			}
			res[v] = append(res[v], r)
		}
	}
	rows := inboundRows(res, z)
	cpu, err := s.inboundCPU()
	return append(rows, cpu), err
}

// inboundCPU profiles one more stream of relay.wasm and one of the raw
// client and reports how long the page's main thread was busy per frame.
// The throughput figures compare the clients only as far as the producer
// (the dev runtime and relay, on the same two cores) keeps up; this one
// compares what each costs the page whatever the producer does. The
// profiler's own overhead is in both.
func (s *session) inboundCPU() (Row, error) {
	us := map[string]float64{}
	for _, v := range []string{wasmIDB, rawJS} {
		var r streamResult
		prof, err := s.tab.cpuProfile(func() (err error) {
			r, err = s.stream(v, s.cfg.Sizes.Frames)
			return err
		})
		if err != nil {
			return Row{}, err
		}
		b, _ := busy(prof)
		us[v] = b * 1000 / float64(r.Frames)
	}
	return Row{
		Figure: "Chromium inbound, page main thread busy per frame (DevTools profiler, one stream each)", Unit: "µs",
		Value: us[wasmIDB], Baseline: us[rawJS], BaseName: "raw JS WebSocket", Ratio: us[wasmIDB] / us[rawJS],
	}, nil
}

func (s *session) stream(variant string, frames int) (streamResult, error) {
	var r streamResult
	err := s.tab.call(&r, "stream", variant, frames, s.cfg.Sizes.FrameBytes)
	return r, err
}

func inboundRows(res map[string][]streamResult, z Sizes) []Row {
	raw := res[rawJS]
	fps := func(v string) []float64 {
		out := make([]float64, len(res[v]))
		for i, r := range res[v] {
			out[i] = r.framesPerSec()
		}
		return out
	}
	// MB/s of relay.wasm counts the wire bytes the raw client counted for
	// the same stream shape in the same repetition (the page cannot see
	// relay.wasm's frames).
	mbps := func(v string) []float64 {
		out := make([]float64, len(res[v]))
		for i, r := range res[v] {
			out[i] = r.framesPerSec() * float64(raw[i].Bytes) / float64(raw[i].Frames) / 1e6
		}
		return out
	}
	shape := fmt.Sprintf("%s × %d B ACP messages", count(z.Frames), z.FrameBytes)
	const base = "raw JS WebSocket"
	main := paired("Chromium inbound, relay.wasm, IndexedDB cursor: "+shape, "frames/s", base, fps(wasmIDB), fps(rawJS))
	main.Target = ratioAtLeast(0.8)
	main.why = (*prober).whyInbound
	bytes := paired("Chromium inbound, relay.wasm, IndexedDB cursor", "MB/s", base, mbps(wasmIDB), mbps(rawJS))
	mem := paired("Chromium inbound, relay.wasm, cursor off (memory store)", "frames/s", base, fps(wasmMemory), fps(rawJS))
	log := paired(fmt.Sprintf("Chromium inbound, relay.wasm, transcript on (history %s)", count(z.History)),
		"frames/s", base, fps(wasmLog), fps(rawJS))
	return []Row{main, bytes, mem, log}
}
