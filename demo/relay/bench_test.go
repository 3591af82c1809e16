package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// The benchmarks measure the relay on loopback with its peers in the same
// machine: the routing benchmarks run 100 raw browsers and a raw runtime in
// this process, so the figures include the peers' own costs, and each runs
// a baseline first — the same frames over 100 plain WebSockets with no relay
// — and reports relayed/direct, which holds up better than frames/s on a
// shared machine. They also report the process's CPU time per frame for
// both (cpu-ns/frame, direct-cpu-ns/frame): on a loaded machine frames/s
// mostly says how much CPU the other processes left, while CPU per frame
// says what the path costs (it includes the in-process peers' share). The memory benchmark runs its browsers in a child process
// so that only the relay's memory is counted.
//
//	go test ./demo/relay -run '^$' -bench Route -benchtime 200000x
//	go test ./demo/relay -run '^$' -bench IdleAttachment -benchtime 1x
//	go test ./demo/relay -run '^$' -bench StalledNeighbours -benchtime 100000x
//	go test ./demo/relay -run '^$' -bench PreUpgradeRSS -benchtime 1x

const benchAttachments = 100

// chunkPayload is an agent_message_chunk of about the size the dev agent
// streams for `count`.
const chunkPayload = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"12345\n"}}}}`

// benchEnv is a relay, a raw runtime and n attached raw browsers.
type benchEnv struct {
	env      *relaytest.Env
	rt       *relaytest.Runtime
	browsers []*relaytest.Browser
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	env := relaytest.Start(b, func(c *relay.Config) {
		c.Limits.HeartbeatInterval = time.Hour
		c.Limits.AttachmentsPerInstance = n + 1
	})
	be := &benchEnv{env: env, rt: env.Connect(b)}
	for range n {
		be.browsers = append(be.browsers, env.Attach(b, ""))
	}
	return be
}

// BenchmarkRouteToBrowsers streams frames from the runtime to 100
// attachments, round robin, and reports frames routed per second.
func BenchmarkRouteToBrowsers(b *testing.B) {
	for _, size := range []int{0, 1024} {
		b.Run(payloadName(size), func(b *testing.B) {
			payload := payloadOf(size)
			direct := directToBrowsers(b, payload)
			report(b, relayToBrowsers(b, payload), direct)
		})
	}
}

// BenchmarkRouteToRuntime has 100 attachments send to the runtime at once
// and reports frames routed per second.
func BenchmarkRouteToRuntime(b *testing.B) {
	for _, size := range []int{0, 1024} {
		b.Run(payloadName(size), func(b *testing.B) {
			payload := payloadOf(size)
			direct := directFromBrowsers(b, payload)
			report(b, relayToRuntime(b, payload), direct)
		})
	}
}

// clock times the streaming part of a run: wall time and the process's CPU
// time (all goroutines) from start to stop.
type clock struct {
	wall time.Time
	cpu  time.Duration
}

// run is what a clock measured.
type run struct{ wall, cpu time.Duration }

func startClock() clock { return clock{wall: time.Now(), cpu: cpuTime()} }

func (c clock) stop() run { return run{wall: time.Since(c.wall), cpu: cpuTime() - c.cpu} }

func report(b *testing.B, relayed, direct run) {
	b.ReportMetric(float64(b.N)/relayed.wall.Seconds(), "frames/s")
	b.ReportMetric(float64(b.N)/direct.wall.Seconds(), "direct-frames/s")
	b.ReportMetric(direct.wall.Seconds()/relayed.wall.Seconds(), "relayed/direct")
	b.ReportMetric(float64(relayed.cpu.Nanoseconds())/float64(b.N), "cpu-ns/frame")
	b.ReportMetric(float64(direct.cpu.Nanoseconds())/float64(b.N), "direct-cpu-ns/frame")
}

// share is how many of b.N frames go to attachment i of 100.
func share(b *testing.B, i int) int {
	return b.N/benchAttachments + btoi(i < b.N%benchAttachments)
}

func relayToBrowsers(b *testing.B, payload []byte) run {
	be := newBenchEnv(b, benchAttachments)
	var wg sync.WaitGroup
	for i, br := range be.browsers {
		wg.Go(func() { discardN(b, br.WS, share(b, i)) })
	}
	start := startClock()
	w := bufio.NewWriterSize(be.rt.Conn, 64<<10)
	var line []byte
	for i := range b.N {
		br := be.browsers[i%benchAttachments]
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Seq: uint64(i/benchAttachments + 1), Payload: payload}
		line, _ = librelay.AppendFrame(line[:0], &f)
		w.Write(append(line, '\n'))
	}
	w.Flush()
	wg.Wait()
	return start.stop()
}

func relayToRuntime(b *testing.B, payload []byte) run {
	be := newBenchEnv(b, benchAttachments)
	start := startClock()
	for i, br := range be.browsers {
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Payload: payload}
		msg, _ := librelay.AppendFrame(nil, &f)
		go func() {
			for range share(b, i) {
				br.WS.Write(context.Background(), websocket.MessageText, msg)
			}
		}()
	}
	for range b.N {
		if _, err := be.rt.ReadCargo(); err != nil {
			b.Fatal(err)
		}
	}
	return start.stop()
}

// directPairs is the baseline: n plain WebSocket pairs on loopback, the
// server ends and the client ends.
func directPairs(b *testing.B, n int) (servers, clients []*websocket.Conn) {
	accepted := make(chan *websocket.Conn, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err == nil {
			accepted <- c
		}
	}))
	b.Cleanup(srv.Close)
	for range n {
		c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		servers = append(servers, <-accepted)
	}
	b.Cleanup(func() {
		for i := range servers {
			servers[i].CloseNow()
			clients[i].CloseNow()
		}
	})
	return servers, clients
}

// directToBrowsers writes the frames the relay would send straight to 100
// WebSockets from one goroutine.
func directToBrowsers(b *testing.B, payload []byte) run {
	servers, clients := directPairs(b, benchAttachments)
	f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: "test", Session: strings.Repeat("a", 43), Seq: 1, Payload: payload}
	msg, _ := librelay.AppendFrame(nil, &f)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			discardN(b, c, share(b, i))
		})
	}
	start := startClock()
	for i := range b.N {
		servers[i%benchAttachments].Write(context.Background(), websocket.MessageText, msg)
	}
	wg.Wait()
	return start.stop()
}

// directFromBrowsers has 100 WebSocket clients send the frames to servers
// that only count them.
func directFromBrowsers(b *testing.B, payload []byte) run {
	servers, clients := directPairs(b, benchAttachments)
	f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: "test", Session: strings.Repeat("a", 43), Payload: payload}
	msg, _ := librelay.AppendFrame(nil, &f)
	var wg sync.WaitGroup
	start := startClock()
	for i := range servers {
		go func() {
			for range share(b, i) {
				clients[i].Write(context.Background(), websocket.MessageText, msg)
			}
		}()
		wg.Go(func() { discardN(b, servers[i], share(b, i)) })
	}
	wg.Wait()
	return start.stop()
}

func payloadName(size int) string {
	if size == 0 {
		return "chunk"
	}
	return strconv.Itoa(size) + "B"
}

// payloadOf is the chunk payload, padded to size bytes when size is set.
func payloadOf(size int) []byte {
	if size <= len(chunkPayload) {
		return []byte(chunkPayload)
	}
	pad := strings.Repeat("x", size-len(chunkPayload))
	return []byte(strings.Replace(chunkPayload, `12345`, pad+"12345", 1))
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// discardN reads n messages without keeping them, so that the benchmark's
// own clients allocate (and make the collector work) as little as possible.
func discardN(b *testing.B, c *websocket.Conn, n int) {
	for range n {
		_, r, err := c.Reader(context.Background())
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		if err != nil {
			b.Error(err)
			return
		}
	}
}

// childEnv names the environment variables that turn this test binary into
// the memory benchmark's client process.
const (
	childURL   = "RELAYWASM_BENCH_ATTACH_URL"
	childToken = "RELAYWASM_BENCH_TOKEN"
	childInst  = "RELAYWASM_BENCH_INSTANCE"
	childCount = "RELAYWASM_BENCH_COUNT"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(childURL); url != "" {
		os.Exit(runClients(url))
	}
	if addr := os.Getenv(childTrickleAddr); addr != "" {
		os.Exit(runTrickle(addr))
	}
	os.Exit(m.Run())
}

// BenchmarkIdleAttachment attaches 10,000 browsers (in a child process) and
// reports the relay's heap, and goroutine stack, per idle attachment.
func BenchmarkIdleAttachment(b *testing.B) {
	const n = 10_000
	env := relaytest.Start(b, func(c *relay.Config) {
		c.Limits.HeartbeatInterval = time.Hour
		c.Limits.AttachmentsPerInstance = n
	})
	env.Connect(b)
	before := memStats()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childURL+"="+env.AttachURL, childToken+"="+env.ClientToken,
		childInst+"="+env.Instance, childCount+"="+strconv.Itoa(n))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		b.Fatalf("client process: %q %v", line, err)
	}
	after := memStats()
	heap := float64(after.HeapAlloc-before.HeapAlloc) / n
	stack := float64(after.StackInuse-before.StackInuse) / n
	b.ReportMetric(heap, "heap-B/attachment")
	b.ReportMetric(stack, "stack-B/attachment")
	b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/attachment")
	fmt.Fprintf(os.Stderr, "idle attachments: %d; heap %.0f B, stack %.0f B per attachment\n", n, heap, stack)
	for range b.N {
	}
}

func memStats() runtime.MemStats {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m
}

// runClients is the child process: it attaches the requested number of
// browsers, says "ready", and holds them until its stdin closes.
func runClients(url string) int {
	n, _ := strconv.Atoi(os.Getenv(childCount))
	token, instance := os.Getenv(childToken), os.Getenv(childInst)
	socks := make(chan *relaytest.Browser, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				b, _, err := relaytest.DialBrowser(context.Background(), url, token, relaytest.DialOptions{})
				if err == nil {
					_, _, err = b.Hello(instance, "", librelay.ProtocolVersion)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "attach:", err)
					os.Exit(1)
				}
				socks <- b
			}
		})
	}
	wg.Wait()
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	close(socks)
	for b := range socks {
		b.WS.CloseNow()
	}
	return 0
}
