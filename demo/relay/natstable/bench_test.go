package natstable_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
)

// BenchmarkCrossNode measures what routing through NATS costs: two relay
// nodes, each a child process (this test binary, so that each node's CPU
// time is its own), on a NATS server in this process, with a raw runtime on
// node A and the raw browsers in this process too. In the same run it
// streams frames from the runtime to 100 browsers attached to node A (the
// baseline: one node, no bus) and to 100 attached to node B (every frame
// crosses A → NATS → B), and it times single frames to a browser on A and
// to one on B, alternately, to get the latency the hop adds.
//
//	go test ./demo/relay/natstable -run '^$' -bench CrossNode -benchtime 200000x
//
// Metrics: same-frames/s and cross-frames/s (and their ratio cross/same);
// node-A-cpu-ns/frame and node-B-cpu-ns/frame while the browsers are on B,
// same-cpu-ns/frame of node A while they are on A; same-p50-ms,
// cross-p50-ms, hop-p50-ms (cross − same) and the same at p99. The bench
// process's own CPU (peers and NATS) is not in any node's figure.
func BenchmarkCrossNode(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the nodes' CPU time from /proc")
	}
	nodes := benchCluster(b)
	a, bn := nodes.env(0), nodes.env(1)
	rt := a.Connect(b)
	b.Cleanup(func() { rt.Conn.Close() })
	waitWelcomed(b, bn)

	same := fanOut(b, rt, a, nodes.procs)
	cross := fanOut(b, rt, bn, nodes.procs)
	b.ReportMetric(float64(b.N)/same.wall.Seconds(), "same-frames/s")
	b.ReportMetric(float64(b.N)/cross.wall.Seconds(), "cross-frames/s")
	b.ReportMetric(same.wall.Seconds()/cross.wall.Seconds(), "cross/same")
	perFrame := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(perFrame(same.cpu[0]), "same-cpu-ns/frame")
	b.ReportMetric(perFrame(cross.cpu[0]), "node-A-cpu-ns/frame")
	b.ReportMetric(perFrame(cross.cpu[1]), "node-B-cpu-ns/frame")
	b.ReportMetric(float64(cross.cpu[0])/float64(same.cpu[0]), "A-cpu/same")
	b.ReportMetric(float64(cross.cpu[1])/float64(same.cpu[0]), "B-cpu/same")

	sameLat, crossLat := latencies(b, rt, a, bn, 2000)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p := func(ds []time.Duration, q float64) time.Duration { return ds[int(q*float64(len(ds)-1))] }
	b.ReportMetric(ms(p(sameLat, 0.5)), "same-p50-ms")
	b.ReportMetric(ms(p(sameLat, 0.99)), "same-p99-ms")
	b.ReportMetric(ms(p(crossLat, 0.5)), "cross-p50-ms")
	b.ReportMetric(ms(p(crossLat, 0.99)), "cross-p99-ms")
	b.ReportMetric(float64(p(crossLat, 0.5))/float64(p(sameLat, 0.5)), "p50-cross/same")
	b.ReportMetric(float64(p(crossLat, 0.99))/float64(p(sameLat, 0.99)), "p99-cross/same")
	b.ReportMetric(ms(p(crossLat, 0.5)-p(sameLat, 0.5)), "hop-p50-ms")
	b.ReportMetric(ms(p(crossLat, 0.99)-p(sameLat, 0.99)), "hop-p99-ms")
}

const benchBrowsers = 100

const chunkPayload = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"12345\n"}}}}`

type fanRun struct {
	wall time.Duration
	cpu  [2]time.Duration // per node
}

// fanOut attaches 100 browsers through env and streams b.N frames to them
// round robin from rt.
func fanOut(b *testing.B, rt *relaytest.Runtime, env *relaytest.Env, procs []*nodeProc) fanRun {
	var browsers []*relaytest.Browser
	for range benchBrowsers {
		browsers = append(browsers, env.Attach(b, ""))
	}
	greet(b, rt, browsers...)
	defer func() {
		for _, br := range browsers {
			br.WS.CloseNow()
		}
	}()
	var wg sync.WaitGroup
	for i, br := range browsers {
		n := b.N/benchBrowsers + btoi(i < b.N%benchBrowsers)
		wg.Go(func() { discardN(b, br.WS, n) })
	}
	cpu0 := [2]time.Duration{procs[0].cpu(), procs[1].cpu()}
	start := time.Now()
	w := bufio.NewWriterSize(rt.Conn, 64<<10)
	var line []byte
	for i := range b.N {
		br := browsers[i%benchBrowsers]
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Seq: uint64(i/benchBrowsers + 1), Payload: []byte(chunkPayload)}
		line, _ = librelay.AppendFrame(line[:0], &f)
		w.Write(append(line, '\n'))
	}
	w.Flush()
	wg.Wait()
	r := fanRun{wall: time.Since(start)}
	r.cpu = [2]time.Duration{procs[0].cpu() - cpu0[0], procs[1].cpu() - cpu0[1]}
	return r
}

// latencies sends n single frames, alternately to a browser on the
// runtime's node and to one on the other, each after the last arrived, and
// returns the one-way times, sorted.
func latencies(b *testing.B, rt *relaytest.Runtime, a, other *relaytest.Env, n int) (same, cross []time.Duration) {
	near, far := a.Attach(b, ""), other.Attach(b, "")
	greet(b, rt, near, far)
	defer near.WS.CloseNow()
	defer far.WS.CloseNow()
	for i := range 2 * n {
		br := near
		if i%2 == 1 {
			br = far
		}
		f := librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Seq: uint64(i/2 + 1), Payload: []byte(chunkPayload)}
		start := time.Now()
		if err := rt.Send(f); err != nil {
			b.Fatal(err)
		}
		if _, err := br.Read(); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(start); br == near {
			same = append(same, d)
		} else {
			cross = append(cross, d)
		}
	}
	slices.Sort(same)
	slices.Sort(cross)
	return same, cross
}

// greet has each browser send the runtime one message and waits until the
// runtime has read them all, as a client's first request would: the
// runtime's node routes to a session held on another node once it knows of
// it (its claim, or a frame from it), and a frame for a session no node is
// known to hold is not sent anywhere.
func greet(b *testing.B, rt *relaytest.Runtime, browsers ...*relaytest.Browser) {
	b.Helper()
	for _, br := range browsers {
		br.Send(librelay.Frame{Type: librelay.TypeACPMessage, Instance: br.Instance, Session: br.Session, Payload: []byte(`{}`)})
	}
	for range browsers {
		if _, err := rt.ReadCargo(); err != nil {
			b.Fatal(err)
		}
	}
}

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

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// waitWelcomed waits until env's node knows the runtime, which another
// node's hold tells it within a round trip on the bus.
func waitWelcomed(b *testing.B, env *relaytest.Env) {
	deadline := time.Now().Add(guard)
	for time.Now().Before(deadline) {
		br, _, err := relaytest.DialBrowser(context.Background(), env.AttachURL, env.ClientToken, relaytest.DialOptions{})
		if err != nil {
			b.Fatal(err)
		}
		f, _, err := br.Hello(env.Instance, "", librelay.ProtocolVersion)
		br.WS.CloseNow()
		if err == nil && f.Type == librelay.TypeWelcome {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("the other node never learned of the runtime")
}

// benchNodes are the benchmark's NATS and two node processes, started once
// per test binary and reused by every run.
type benchNodes struct {
	key   ed25519.PrivateKey
	nats  *server.Server
	procs []*nodeProc
}

var (
	benchOnce sync.Once
	benchSet  *benchNodes
	benchErr  error
)

func benchCluster(b *testing.B) *benchNodes {
	benchOnce.Do(func() { benchSet, benchErr = startBenchNodes() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchSet
}

func (n *benchNodes) env(i int) *relaytest.Env {
	addr := n.procs[i].addr
	return &relaytest.Env{
		HTTPURL: "http://" + addr, AttachURL: "ws://" + addr + "/v1/attach", Instance: stack.DefaultInstance,
		ClientToken: stack.DefaultClientToken, RuntimeToken: stack.DefaultRuntimeToken,
		Key: n.key.Public().(ed25519.PublicKey),
	}
}

func startBenchNodes() (*benchNodes, error) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: librelay.MaxFrameBytes + 1024})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return nil, fmt.Errorf("NATS did not start")
	}
	n := &benchNodes{key: key, nats: s}
	for range 2 {
		p, err := startNodeProc(s.ClientURL(), key)
		if err != nil {
			n.stop()
			return nil, err
		}
		n.procs = append(n.procs, p)
	}
	return n, nil
}

func (n *benchNodes) stop() {
	for _, p := range n.procs {
		p.stdin.Close()
		p.cmd.Wait()
	}
	n.nats.Shutdown()
}

// nodeProc is a relay node running in a child process.
type nodeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

const (
	childNATS = "NATSTABLE_BENCH_NATS"
	childKey  = "NATSTABLE_BENCH_KEY"
)

func startNodeProc(natsURL string, key ed25519.PrivateKey) (*nodeProc, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childNATS+"="+natsURL, childKey+"="+hex.EncodeToString(key.Seed()))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		cmd.Process.Kill()
		return nil, fmt.Errorf("node process: %q %v", line, err)
	}
	return &nodeProc{cmd: cmd, stdin: stdin, addr: addr}, nil
}

// cpu is the node process's CPU time so far, the sum over its threads of
// the nanoseconds /proc/<pid>/task/<tid>/schedstat counts on CPU. (The
// clock ticks of /proc/<pid>/stat are 1/100 s: a short run, as the smoke
// run of make test, could read 0.) A Go program's threads do not exit, so
// none of its time is missed.
func (p *nodeProc) cpu() time.Duration {
	dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

func TestMain(m *testing.M) {
	if url := os.Getenv(childNATS); url != "" {
		os.Exit(runNode(url, os.Getenv(childKey)))
	}
	code := m.Run()
	if benchSet != nil {
		benchSet.stop()
	}
	os.Exit(code)
}

// runNode is the child: one relay node on a free loopback port, until its
// stdin closes.
func runNode(natsURL, seed string) int {
	sb, err := hex.DecodeString(seed)
	if err != nil {
		return 2
	}
	c, err := stack.StartCluster(context.Background(), stack.ClusterConfig{
		Nodes: 1, NATS: natsURL, RelayOnly: true, Key: ed25519.NewKeyFromSeed(sb), Logger: slog.New(slog.DiscardHandler),
		EditRelay: func(_ int, c *relay.Config) {
			c.Limits.HeartbeatInterval = time.Hour
			c.Limits.AttachmentsPerInstance = 1 << 20
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if path := os.Getenv("NATSTABLE_BENCH_CPUPROFILE"); path != "" {
		f, _ := os.Create(path + "." + strconv.Itoa(os.Getpid()))
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("ADDR %s\n", c.Node(0).Addr())
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}
