package relay_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// The environment variables that turn this test binary into
// BenchmarkPreUpgradeRSS's client process.
const (
	childTrickleAddr = "RELAYWASM_BENCH_TRICKLE_ADDR"
	childTricklePad  = "RELAYWASM_BENCH_TRICKLE_PAD"
)

// preUpgradeSockets is how many connections BenchmarkPreUpgradeRSS opens.
const preUpgradeSockets = 2000

// BenchmarkPreUpgradeRSS opens 2,000 connections (in a child process) that
// each send the start of an upgrade request and then a header just under
// Limits.HeaderBytes, and never finish it — the most a peer without a
// credential can make the relay hold per connection for HeaderTimeout —
// and reports the relay process's resident memory above what it was idle.
// Past Limits.PendingConns connections are answered 503 and closed, so
// 1,024 of the 2,000 are held (HeaderTimeout is raised to 2 minutes, so
// none is let go before all are open). RELAYWASM_BENCH_TRICKLE_PAD sets the header
// size instead (bytes), to show what a header over the limit costs.
//
//	go test ./demo/relay -run '^$' -bench PreUpgradeRSS -benchtime 1x
func BenchmarkPreUpgradeRSS(b *testing.B) {
	env := relaytest.Start(b, func(c *relay.Config) {
		c.Limits.HeartbeatInterval = time.Hour
		// Opening 2,000 connections takes this loaded machine longer than
		// the 10 s default, and the figure is for all of them at once.
		c.Limits.HeaderTimeout = 2 * time.Minute
		// Every connection comes from 127.0.0.1, and the figure is for
		// the whole bound: one address may take all of it here.
		c.Limits.PendingConnsPerAddress = preUpgradeSockets
	})
	pad := env.Relay.Limits().HeaderBytes - 1024
	if v, err := strconv.Atoi(os.Getenv(childTricklePad)); err == nil {
		pad = v
	}
	memStats()
	idle := rss(b)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childTrickleAddr+"="+env.Server.Listener.Addr().String(), childTricklePad+"="+strconv.Itoa(pad))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		b.Fatalf("client process: %q %v", line, err)
	}
	held := rss(b)
	heap := memStats()
	b.ReportMetric(float64(heap.HeapInuse+heap.StackInuse)/(1<<20), "heap+stack-MiB")
	b.ReportMetric(float64(held-idle)/(1<<20), "MiB-above-idle")
	b.ReportMetric(float64(idle)/(1<<20), "idle-MiB")
	fmt.Fprintf(os.Stderr, "pre-upgrade sockets: %d with a %d-byte header, %s; relay RSS %.1f MiB idle, %.1f MiB held (+%.1f MiB)\n",
		preUpgradeSockets, pad, strings.TrimSpace(strings.TrimPrefix(line, "ready ")),
		float64(idle)/(1<<20), float64(held)/(1<<20), float64(held-idle)/(1<<20))
	for range b.N {
	}
}

// rss is this process's resident set size, in bytes (Linux).
func rss(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status: ", err)
	}
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Skip("no VmRSS")
	return 0
}

// runTrickle is the client process: it opens the connections, writes each
// one's partial request, says "ready" with how many the relay kept open, and
// holds them until its stdin closes.
func runTrickle(addr string) int {
	pad, _ := strconv.Atoi(os.Getenv(childTricklePad))
	head := "GET " + relayleg.AttachPath + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Pad: "
	body := []byte(head + strings.Repeat("a", pad))
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < preUpgradeSockets; i += 32 {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					fmt.Fprintln(os.Stderr, "dial:", err)
					os.Exit(1)
				}
				c.SetDeadline(time.Now().Add(relaytest.IOTimeout))
				c.Write(body) // a refused connection may fail it: it is counted below
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// A connection the relay refused has its 503 (or 431) waiting, or is
	// closed; one it holds has nothing to say within 2 s (a loaded relay
	// can take a second to answer all it refuses). All are asked at once:
	// one after another, the held ones' waits added up.
	var open atomic.Int64
	deadline := time.Now().Add(2 * time.Second)
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(deadline)
			if _, err := c.Read(make([]byte, 1)); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					open.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("ready %d held open, %d refused (opened in %v)\n", open.Load(), int64(len(conns))-open.Load(), time.Since(start).Round(time.Millisecond))
	bufio.NewReader(os.Stdin).ReadString('\n')
	for _, c := range conns {
		c.Close()
	}
	return 0
}
