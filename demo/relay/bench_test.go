package relay_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
)

// The benchmarks measure the relay on loopback with its peers in the same
// machine: the routing benchmarks run 100 raw browsers and a raw runtime in
// this process, so the figures include the peers' own costs; the memory
// benchmark runs its browsers in a child process so that only the relay's
// memory is counted.
//
//	go test ./demo/relay -run '^$' -bench . -benchtime 200000x
//	go test ./demo/relay -run '^$' -bench IdleAttachment -benchtime 1x

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
			be := newBenchEnv(b, benchAttachments)
			payload := payloadOf(size)
			var wg sync.WaitGroup
			for i, br := range be.browsers {
				share := b.N/benchAttachments + btoi(i < b.N%benchAttachments)
				wg.Go(func() { readN(b, br, share) })
			}
			b.ResetTimer()
			start := time.Now()
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
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
		})
	}
}

// BenchmarkRouteToRuntime has 100 attachments send to the runtime at once
// and reports frames routed per second.
func BenchmarkRouteToRuntime(b *testing.B) {
	for _, size := range []int{0, 1024} {
		b.Run(payloadName(size), func(b *testing.B) {
			be := newBenchEnv(b, benchAttachments)
			payload := payloadOf(size)
			b.ResetTimer()
			start := time.Now()
			for i, br := range be.browsers {
				share := b.N/benchAttachments + btoi(i < b.N%benchAttachments)
				go func() {
					for range share {
						br.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Payload: payload})
					}
				}()
			}
			for range b.N {
				if _, err := be.rt.ReadCargo(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
		})
	}
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

func readN(b *testing.B, br *relaytest.Browser, n int) {
	for range n {
		if _, err := br.ReadRaw(); err != nil {
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
