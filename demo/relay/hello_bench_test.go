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
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// childSilentAddr and childSilentCount turn this test binary into the
// client process of BenchmarkAwaitingHello and TestAwaitingHelloHoldsNoRequest.
const (
	childSilentAddr  = "RELAYWASM_BENCH_SILENT_ADDR"
	childSilentCount = "RELAYWASM_BENCH_SILENT_COUNT"
)

// silentPad is the header each silent socket's upgrade request carries
// (cookies, say): just under Limits.HeaderBytes.
const silentPad = 15 << 10

func init() {
	if addr := os.Getenv(childSilentAddr); addr != "" {
		os.Exit(runSilent(addr))
	}
}

// BenchmarkAwaitingHello upgrades 1,000 browser sockets (in a child
// process), each with 15 KiB of headers, that never send their hello, and
// reports the relay's heap and goroutine stacks per socket: what a socket
// holds while it waits, which must not include its upgrade request.
//
//	go test ./demo/relay -run '^$' -bench AwaitingHello -benchtime 1x
func BenchmarkAwaitingHello(b *testing.B) {
	per := awaitingHello(b, 1000)
	b.ReportMetric(per, "heap+stack-B/socket")
	fmt.Fprintf(os.Stderr, "sockets awaiting their hello: 1000 with %d-byte headers; %.0f B of heap and stack each\n", silentPad, per)
	for range b.N {
	}
}

// A socket that never says hello holds less than its upgrade request's
// headers: the request is not kept while the hello is awaited (it was: the
// handler's goroutine awaited it, holding the request and net/http's
// buffers, about 50 KiB a socket with these headers). Memory, not time:
// 500 sockets make the collector's noise small beside the 15 KiB each
// request would add.
func TestAwaitingHelloHoldsNoRequest(t *testing.T) {
	if per := awaitingHello(t, 500); per >= silentPad {
		t.Fatalf("a socket awaiting its hello holds %.0f B of heap and stack, more than its %d bytes of headers", per, silentPad)
	}
}

// awaitingHello upgrades n silent sockets from a child process and returns
// the relay's heap and stack per socket.
func awaitingHello(tb testing.TB, n int) float64 {
	env := relaytest.Start(tb, func(c *relay.Config) {
		c.Limits.HelloTimeout = 2 * time.Minute // all of them wait at once
		c.Limits.HeartbeatInterval = time.Hour
	})
	before := memStats()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childSilentAddr+"="+env.Server.Listener.Addr().String(), childSilentCount+"="+strconv.Itoa(n))
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		tb.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		tb.Fatalf("client process: %q %v", line, err)
	}
	after := memStats()
	return float64(int64(after.HeapInuse+after.StackInuse)-int64(before.HeapInuse+before.StackInuse)) / float64(n)
}

// runSilent is the client process: it upgrades the sockets by hand, says
// "ready" once every one has its 101, and holds them until stdin closes.
func runSilent(addr string) int {
	silentSockets, _ := strconv.Atoi(os.Getenv(childSilentCount))
	req := "GET " + relayleg.AttachPath + " HTTP/1.1\r\nHost: " + addr + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://app.example\r\n" +
		"Sec-WebSocket-Protocol: " + relayleg.Subprotocol + ", " + relayleg.BearerSubprotocol("client-token") + "\r\n" +
		"Cookie: c=" + strings.Repeat("a", silentPad) + "\r\n\r\n"
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < silentSockets; i += 16 {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					_, err = c.Write([]byte(req))
				}
				if err == nil {
					var resp string
					resp, err = bufio.NewReader(c).ReadString('\n')
					if err == nil && !strings.Contains(resp, " 101 ") {
						err = fmt.Errorf("upgrade %d: %q", i, resp)
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "silent socket:", err)
					os.Exit(1)
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	for _, c := range conns {
		c.Close()
	}
	return 0
}
