package relaytest

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A frozen proxy holds an end as it holds bytes: the upstream closing (a
// relay giving up on a silent peer) reaches the peer only after Thaw. A
// phone whose network changed never hears of the relay's close; tests/e2e
// freezes the proxy to make such a socket.
func TestFreezeHoldsTheClose(t *testing.T) {
	ln, p := proxied(t)
	peer := dial(t, p.Addr())
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	// A byte through first: the proxy has taken the connection and is
	// copying.
	if _, err := peer.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(up, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	up.Close()
	readsNothing(t, peer, "while frozen the peer")

	p.Thaw()
	peer.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 64)
	if n, err := peer.Read(buf); err != io.EOF {
		t.Fatalf("after the thaw the peer read %q, %v; want the end", buf[:n], err)
	}
}

// A dial while frozen is held, not refused: a client that gave a silent
// socket up and dials again meets the same silence, and its bytes go
// through once the network is back. (A refused dial is a report of its own
// in a browser: Firefox logs it as an error of the page.)
func TestFreezeHoldsNewDials(t *testing.T) {
	ln, p := proxied(t)
	p.Freeze()
	peer := dial(t, p.Addr())
	if _, err := peer.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}
	readsNothing(t, peer, "a dial while frozen")

	p.Thaw()
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	up.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 1)
	if _, err := io.ReadFull(up, buf); err != nil || buf[0] != 7 {
		t.Fatalf("after the thaw the relay read %v, %v; want the byte sent while frozen", buf, err)
	}
}

// proxied is a proxy in front of a listener that stands for the relay.
func proxied(t *testing.T) (net.Listener, *Proxy) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, NewProxy(t, ln.Addr().String())
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readsNothing fails the test if c reads anything, its end included, within
// 300 ms. The wait only bounds the check: something let through late would
// pass it, never fail it falsely.
func readsNothing(t *testing.T, c net.Conn, who string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s read %q, %v; want nothing", who, buf[:n], err)
	}
}
