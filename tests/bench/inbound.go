package bench

import "fmt"

// The page's inbound clients (bench.js setup): the raw WebSocket baseline
// and relay.wasm four ways.
const (
	rawJS      = "raw"        // a bare WebSocket, JSON.parse per message
	wasmIDB    = "wasm"       // relay.wasm as an app uses it: cursor in IndexedDB
	wasmMemory = "memory"     // the cursor off: the store in memory
	wasmLog    = "transcript" // IndexedDB with a transcript (history) on
	wasmWorker = "worker"     // loadRelay({worker: true}): IndexedDB cursor, relay.wasm in a Web Worker
)

var inboundVariants = []string{rawJS, wasmIDB, wasmMemory, wasmLog, wasmWorker}

// streamResult is one timed stream (bench.js stream).
type streamResult struct {
	MS     float64 `json:"ms"`
	Frames int     `json:"frames"`
	Bytes  int     `json:"bytes"` // wire bytes; counted by the raw client only
	cpu    cpuTime // the renderer's, around the stream
}

func (r streamResult) framesPerSec() float64 { return float64(r.Frames) / (r.MS / 1000) }

// inbound streams the same prompt to each variant in turn, the order
// rotating every repetition so that none always runs first, after one short
// stream each to warm up (JIT tiers, the store's database, the relay's
// buffers).
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
	return inboundRows(res, z), nil
}

// stream runs one stream and reads the CPU time the renderer spent around
// it.
func (s *session) stream(variant string, frames int) (streamResult, error) {
	var r streamResult
	before, err := s.tab.cpuTime()
	if err == nil {
		err = s.tab.call(&r, "stream", variant, frames, s.cfg.Sizes.FrameBytes)
	}
	if err != nil {
		return r, err
	}
	after, err := s.tab.cpuTime()
	r.cpu = after.minus(before)
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
	// CPU per frame compares what each client costs the page whatever the
	// producer (the dev runtime and relay, on the same two cores) does: the
	// throughput figures compare the clients only as far as it keeps up.
	cpu := func(v string, f func(cpuTime) float64) []float64 {
		out := make([]float64, len(res[v]))
		for i, r := range res[v] {
			out[i] = f(r.cpu) * 1e6 / float64(r.Frames)
		}
		return out
	}
	mainThread := func(c cpuTime) float64 { return c.thread }
	process := func(c cpuTime) float64 { return c.process }
	shape := fmt.Sprintf("%s × %d B ACP messages", count(z.Frames), z.FrameBytes)
	const base = "raw JS WebSocket"
	main := paired("Chromium inbound, relay.wasm, IndexedDB cursor: "+shape, "frames/s", base, fps(wasmIDB), fps(rawJS))
	main.Target = ratioAtLeast(0.8)
	main.why = (*prober).whyInbound
	bytes := paired("Chromium inbound, relay.wasm, IndexedDB cursor", "MB/s", base, mbps(wasmIDB), mbps(rawJS))
	mem := paired("Chromium inbound, relay.wasm, cursor off (memory store)", "frames/s", base, fps(wasmMemory), fps(rawJS))
	log := paired(fmt.Sprintf("Chromium inbound, relay.wasm, transcript on (history %s)", count(z.History)),
		"frames/s", base, fps(wasmLog), fps(rawJS))
	worker := paired("Chromium inbound, worker mode (relay.wasm in a Web Worker), IndexedDB cursor", "frames/s", base, fps(wasmWorker), fps(rawJS))
	worker.Target = ratioAtLeast(0.9)
	workerCPU := paired("Chromium inbound, worker mode, page main thread CPU per frame", "µs", base, cpu(wasmWorker, mainThread), cpu(rawJS, mainThread))
	workerCPU.Target = ratioAtMost(0.5)
	mainCPU := paired("Chromium inbound, relay.wasm, page main thread CPU per frame", "µs", base, cpu(wasmIDB, mainThread), cpu(rawJS, mainThread))
	mainCPU.Target = ratioAtMost(1.1)
	logCPU := paired("Chromium inbound, relay.wasm, transcript on, page main thread CPU per frame", "µs", base, cpu(wasmLog, mainThread), cpu(rawJS, mainThread))
	logCPU.Target = ratioAtMost(1.3)
	logCPU.why = (*prober).whyTranscript
	return []Row{
		main, bytes, mem, log, worker,
		mainCPU,
		// The same without IndexedDB: what the store's writes cost the page
		// is the difference.
		paired("Chromium inbound, relay.wasm, cursor off (memory store), page main thread CPU per frame", "µs", base, cpu(wasmMemory, mainThread), cpu(rawJS, mainThread)),
		logCPU,
		workerCPU,
		paired("Chromium inbound, relay.wasm, renderer process CPU per frame", "µs", base, cpu(wasmIDB, process), cpu(rawJS, process)),
		paired("Chromium inbound, worker mode, renderer process CPU per frame", "µs", base, cpu(wasmWorker, process), cpu(rawJS, process)),
	}
}
