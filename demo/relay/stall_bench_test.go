package relay_test

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// stalledNeighbours is how many attachments stop reading in
// BenchmarkStalledNeighbours.
const stalledNeighbours = 16

// stallFill is what the runtime sends each stalled attachment: more than its
// send queue (1 MiB here; 4,096 frames) plus what the kernel buffers on loopback (up to
// 4 MiB of send buffer, 16 KiB of receive buffer), so that each one's queue
// fills while the healthy stream runs.
const stallFill = 8 << 20

// healthyWindow is how many frames the healthy attachment may have in flight.
const healthyWindow = 2048

// BenchmarkStalledNeighbours streams b.N chunk frames from the runtime to
// one healthy attachment, first with no other attachment and then, on a
// fresh relay, with 16 attachments of the same instance that never read,
// and reports the healthy attachment's frames/s in both and their ratio.
// The runtime leg carries the same bytes in both runs: 8 MiB of 64 KiB
// frames per stalled attachment, interleaved with the healthy stream, go to
// the stalled attachments in the second and to sessions nobody holds (which
// the relay drops) in the first. A relay that waited any time for a full
// queue would make the healthy attachment wait behind each stalled one.
//
//	go test ./demo/relay -run '^$' -bench StalledNeighbours -benchtime 100000x
func BenchmarkStalledNeighbours(b *testing.B) {
	// In rounds, alone and beside in the order ABBA, so that the machine's
	// load drifting during the run weighs on both alike.
	var alone, beside run
	for _, n := range []int{0, stalledNeighbours, stalledNeighbours, 0} {
		r := stalledRun(b, n, b.N/2)
		sum := &alone
		if n > 0 {
			sum = &beside
		}
		sum.wall += r.wall
		sum.cpu += r.cpu
	}
	b.ReportMetric(float64(b.N)/alone.wall.Seconds(), "alone-frames/s")
	b.ReportMetric(float64(b.N)/beside.wall.Seconds(), "stalled16-frames/s")
	b.ReportMetric(alone.wall.Seconds()/beside.wall.Seconds(), "stalled16/alone")
	b.ReportMetric(float64(alone.cpu.Nanoseconds())/float64(b.N), "alone-cpu-ns/frame")
	b.ReportMetric(float64(beside.cpu.Nanoseconds())/float64(b.N), "stalled16-cpu-ns/frame")
}

// stalledRun streams frames to a healthy attachment with n stalled
// neighbours and returns how long the healthy attachment took to get them
// and the process's CPU time meanwhile (the filler's cost included).
func stalledRun(b *testing.B, n, frames int) run {
	env := relaytest.Start(b, func(c *relay.Config) {
		c.Limits.HeartbeatInterval = time.Hour
		c.Limits.QueueFrames, c.Limits.QueueBytes = 4096, 1<<20
	})
	rt := env.Connect(b)
	healthy := env.Attach(b, "")
	sessions := make([]string, stalledNeighbours)
	for i := range sessions {
		sessions[i] = "nobody-holds-" + strings.Repeat("x", 30) + string(rune('a'+i))
		if i < n {
			sessions[i] = env.AttachWith(b, "", relaytest.DialOptions{ReadBuf: 16 << 10}).Session
		}
	}
	filler := []byte(`"` + strings.Repeat("s", 64<<10) + `"`)
	fills := stalledNeighbours * stallFill / len(filler) // filler frames in all
	every := max(frames/fills, 1)
	// The runtime keeps at most healthyWindow frames in flight to the
	// healthy attachment, as a producer paced by a consumer that keeps up
	// would: the healthy socket's queue never fills, so what the figure
	// shows is whether its neighbours hold it up.
	inFlight := make(chan struct{}, healthyWindow)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range frames {
			discardN(b, healthy.WS, 1)
			<-inFlight
		}
	})
	start := startClock()
	w := bufio.NewWriterSize(rt.Conn, 64<<10)
	var line []byte
	write := func(f librelay.Frame) {
		line, _ = librelay.AppendFrame(line[:0], &f)
		w.Write(append(line, '\n'))
	}
	sent := 0
	for i := range frames {
		select {
		case inFlight <- struct{}{}:
		default:
			w.Flush()
			inFlight <- struct{}{}
		}
		write(librelay.Frame{Type: librelay.TypeACPMessage, Instance: env.Instance, Session: healthy.Session, Seq: uint64(i + 1), Payload: []byte(chunkPayload)})
		if i%every == 0 && sent < fills {
			write(librelay.Frame{Type: librelay.TypeACPMessage, Instance: env.Instance, Session: sessions[sent%stalledNeighbours], Payload: filler})
			sent++
		}
	}
	for ; sent < fills; sent++ {
		write(librelay.Frame{Type: librelay.TypeACPMessage, Instance: env.Instance, Session: sessions[sent%stalledNeighbours], Payload: filler})
	}
	w.Flush()
	wg.Wait()
	return start.stop()
}
