package stack

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/natstable"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// ClusterConfig says what StartCluster runs: relay nodes that route through
// NATS (natstable), each serving both legs and the page on an address of
// its own, and a runtime dialled into one of them.
type ClusterConfig struct {
	// Nodes is how many relay nodes (default 3).
	Nodes int
	// Addr is the first node's address; node i listens on its port + i
	// (port 0, the default: each a free port).
	Addr string
	// NATS is the URL of a NATS server or cluster to route through; empty
	// starts one in-process on NATSAddr (default a free loopback port).
	NATS, NATSAddr string

	WebDir, ModuleDir                   string
	Instance, ClientToken, RuntimeToken string
	// Key signs every node's welcomes and keys their attachment ids: the
	// nodes share it, so a page pins one key and an id issued by one node
	// is reclaimed on any other.
	Key ed25519.PrivateKey
	// RelayOnly runs no runtime; RuntimeNode is the node the runtime dials.
	RelayOnly   bool
	RuntimeNode int

	// EditRelay adjusts a node's relay config. With TLSCert and TLSKey the
	// node serves both legs and the page over TLS (Node.TLS), as the single
	// relay does, and the runtime dialling it trusts that certificate chain.
	EditRelay   func(node int, c *relay.Config)
	EditTable   func(node int, c *natstable.Config)
	EditRuntime func(*devruntime.Config)
	Logger      *slog.Logger
}

// Cluster is a running set of relay nodes, their NATS (when embedded) and
// a runtime.
type Cluster struct {
	cfg   ClusterConfig
	mu    sync.Mutex
	nats  *server.Server
	natsU string
	nodes []*Node
	rt    *runtimeProc
	errc  chan error
}

// Node is one relay node of a cluster.
type Node struct {
	Index int
	Name  string
	addr  string
	rl    *relay.Relay
	table *natstable.Table
	srv   *http.Server
	ln    *trackingListener
	rtTLS *tls.Config // what a runtime dialling the node trusts; nil over plain HTTP
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return n.addr }

// HTTPURL is the node's base URL (https:// when it serves TLS), what a
// runtime dials.
func (n *Node) HTTPURL() string { return n.scheme("http") + "://" + n.addr }

// AttachURL is the node's browser leg (wss:// over TLS).
func (n *Node) AttachURL() string { return n.scheme("ws") + "://" + n.addr + relayleg.AttachPath }

// TLS reports whether the node serves both legs and the page over TLS
// (relay.Config.TLSCert and TLSKey, set through EditRelay), as the single
// relay does.
func (n *Node) TLS() bool { return n.rtTLS != nil }

func (n *Node) scheme(plain string) string {
	if n.TLS() {
		return plain + "s"
	}
	return plain
}

// Relay and Table are the node's relay and routing table.
func (n *Node) Relay() *relay.Relay     { return n.rl }
func (n *Node) Table() *natstable.Table { return n.table }

// StartCluster starts NATS (unless cfg.NATS names one), the nodes and,
// unless RelayOnly, the runtime, and returns once the runtime is welcomed.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 3
	}
	cfg.Addr = or(cfg.Addr, DefaultAddr)
	cfg.NATSAddr = or(cfg.NATSAddr, DefaultAddr)
	cfg.Instance = or(cfg.Instance, DefaultInstance)
	cfg.ClientToken = or(cfg.ClientToken, DefaultClientToken)
	cfg.RuntimeToken = or(cfg.RuntimeToken, DefaultRuntimeToken)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Key == nil {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, stackError(err)
		}
		cfg.Key = key
	}
	c := &Cluster{cfg: cfg, natsU: cfg.NATS, errc: make(chan error, 1)}
	if c.natsU == "" {
		if err := c.StartNATS(); err != nil {
			return nil, err
		}
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		c.Close()
		return nil, stackError(err)
	}
	p, _ := strconv.Atoi(port)
	for i := range cfg.Nodes {
		addr := net.JoinHostPort(host, "0")
		if p != 0 {
			addr = net.JoinHostPort(host, strconv.Itoa(p+i))
		}
		n, err := c.startNode(i, addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	if !cfg.RelayOnly {
		if err := c.startRuntime(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// NATSURL is the URL the nodes route through.
func (c *Cluster) NATSURL() string { return c.natsU }

// Nodes are the cluster's nodes, in order (a killed node stays in its place).
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Node is node i.
func (c *Cluster) Node(i int) *Node { return c.Nodes()[i] }

// PublicKey is the key every node signs with.
func (c *Cluster) PublicKey() ed25519.PublicKey { return c.cfg.Key.Public().(ed25519.PublicKey) }

// Config is the config in force, defaults filled in.
func (c *Cluster) Config() ClusterConfig { return c.cfg }

// Err receives the failure of a part that stopped on its own.
func (c *Cluster) Err() <-chan error { return c.errc }

// StartNATS starts the embedded NATS server, on the address it had before
// if it ran already (so the nodes' reconnects find it).
func (c *Cluster) StartNATS() error {
	addr := c.cfg.NATSAddr
	if c.natsU != "" {
		u := c.natsU[len("nats://"):]
		addr = u
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return stackError(err)
	}
	pn, _ := strconv.Atoi(port)
	if pn == 0 {
		pn = -1 // a free port
	}
	s, err := server.NewServer(&server.Options{
		Host: host, Port: pn, NoLog: true, NoSigs: true,
		// A frame to a runtime may be librelay.MaxFrameBytes, plus the
		// table's header.
		MaxPayload: librelay.MaxFrameBytes + 1024,
	})
	if err != nil {
		return stackError(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return stackError(errors.New("embedded NATS did not start"))
	}
	c.mu.Lock()
	c.nats, c.natsU = s, s.ClientURL()
	c.mu.Unlock()
	return nil
}

// StopNATS shuts the embedded NATS server down; every node loses the bus.
func (c *Cluster) StopNATS() {
	c.mu.Lock()
	s := c.nats
	c.nats = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

func (c *Cluster) startNode(i int, addr string) (*Node, error) {
	log := c.cfg.Logger.With("part", "relay", "relay_node", i)
	tcfg := natstable.Config{URL: c.natsU, Name: fmt.Sprintf("node-%d", i), Logger: log}
	if c.cfg.EditTable != nil {
		c.cfg.EditTable(i, &tcfg)
	}
	table, err := natstable.New(tcfg)
	if err != nil {
		return nil, stackError(err)
	}
	name := fmt.Sprintf("%s node-%d", relay.DefaultName, i)
	rcfg := relay.Config{
		Key:                c.cfg.Key,
		RuntimeCredentials: map[string]string{c.cfg.RuntimeToken: c.cfg.Instance},
		ClientCredentials:  map[string]string{c.cfg.ClientToken: c.cfg.Instance},
		OriginPatterns:     DefaultOrigins,
		Name:               name,
		Table:              table,
		Logger:             log,
	}
	if c.cfg.EditRelay != nil {
		c.cfg.EditRelay(i, &rcfg)
	}
	var rtTLS *tls.Config
	if rcfg.TLSCert != "" {
		if rtTLS, err = runtimeTLS(rcfg.TLSCert); err != nil {
			table.Close()
			return nil, stackError(err)
		}
	}
	rl, err := relay.New(rcfg)
	if err != nil {
		table.Close()
		return nil, stackError(err)
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		rl.Close()
		table.Close()
		return nil, listenError(addr, err)
	}
	// TLS goes over the tracking listener, so that Kill cuts the TCP
	// connections under it; NATS between the nodes stays as configured
	// (the embedded one plain, on loopback).
	ln := &trackingListener{Listener: raw, conns: make(map[net.Conn]struct{})}
	var served net.Listener = ln
	if tc := rl.TLSConfig(); tc != nil {
		served = tls.NewListener(ln, tc)
	}
	mux := http.NewServeMux()
	mux.Handle(relayleg.ConnectPath, rl)
	mux.Handle(relayleg.AttachPath, rl)
	if page := newStatic(c.cfg.WebDir, c.cfg.ModuleDir, false); page != nil {
		mux.Handle("/", page)
	}
	n := &Node{Index: i, Name: name, addr: raw.Addr().String(), rl: rl, table: table, ln: ln, rtTLS: rtTLS,
		srv: &http.Server{Handler: mux,
			// TLS handshake failures and the like are a peer's problem, not the demo's.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}}
	// The bounds the single relay is served with (headers, bodies,
	// responses, connections not yet upgraded): without them a node held a
	// request whose body never came for ever, and any number of them.
	rl.ConfigureServer(n.srv, n.addr)
	go func() {
		if err := n.srv.Serve(served); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			c.fail(stackError(err))
		}
	}()
	return n, nil
}

func (c *Cluster) fail(err error) {
	select {
	case c.errc <- err:
	default:
	}
}

// Kill ends node i as a crash would: its NATS connection and every socket
// it holds are cut at once, with no relay.error and no release. The other
// nodes learn of it from their sockets' clients redialling them and from
// its heartbeats stopping. With the embedded NATS server, Kill returns once
// the server has let the node's connection and its subscriptions go, as it
// does moments after a process dies: a frame published next finds nobody
// there (and its publisher hears so), instead of racing the server's
// noticing. That race is real, but it is not what a test of a dead node
// means to try.
func (c *Cluster) Kill(i int) {
	n := c.Node(i)
	c.mu.Lock()
	s := c.nats
	c.mu.Unlock()
	before := 0
	if s != nil {
		before = s.GlobalAccount().NumLocalConnections()
	}
	n.table.Conn().Close()
	n.ln.Close()
	n.ln.cutAll()
	// The account counts a connection until its subscriptions are gone.
	for deadline := time.Now().Add(10 * time.Second); s != nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s.GlobalAccount().NumLocalConnections() < before {
			return
		}
	}
}

// Restart brings node i back on its address with a fresh relay and table
// (a new process): it knows no attachment, and ids reclaimed on it verify
// with the shared key.
func (c *Cluster) Restart(i int) error {
	old := c.Node(i)
	old.rl.Close() // what is left of it: its sockets and bus are already cut
	old.table.Close()
	n, err := c.startNode(i, old.addr)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.nodes[i] = n
	c.mu.Unlock()
	return nil
}

func (c *Cluster) startRuntime(ctx context.Context) error {
	n := c.Node(c.cfg.RuntimeNode)
	cfg := devruntime.Config{
		Relay: n.HTTPURL(), Instance: c.cfg.Instance, Credential: c.cfg.RuntimeToken,
		RelayKey: c.PublicKey(), TLS: n.rtTLS, Logger: c.cfg.Logger.With("part", "runtime"),
	}
	if c.cfg.EditRuntime != nil {
		c.cfg.EditRuntime(&cfg)
	}
	set := func(p *runtimeProc) {
		c.mu.Lock()
		c.rt = p
		c.mu.Unlock()
	}
	return runRuntime(ctx, cfg, set, func(err error) {
		if err != nil {
			c.fail(stackError(err))
		}
	})
}

// Close stops the runtime, every node (cleanly: relay.error shutting_down)
// and the embedded NATS.
func (c *Cluster) Close() error {
	c.mu.Lock()
	p, nodes := c.rt, c.nodes
	c.rt, c.nodes = nil, nil
	c.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
	for _, n := range nodes {
		n.srv.Close()
		n.rl.Close()
		n.table.Close()
		n.ln.cutAll()
	}
	c.StopNATS()
	return nil
}

// trackingListener remembers the connections it accepted, hijacked ones
// included, so that Kill can cut them all.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cut   bool
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = struct{}{}
	return &trackedConn{Conn: c, l: l}, nil
}

func (l *trackingListener) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as when the process dies
		}
		c.Close()
	}
	clear(l.conns)
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c.Conn)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// SyscallConn and CloseWrite pass through to the TCP connection: the relay
// reads through the former and half-closes through the latter, and a
// wrapper without them would change how it behaves.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *trackedConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}
