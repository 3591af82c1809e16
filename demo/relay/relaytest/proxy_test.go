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
// relay giving up on a silent peer) reaches the peer only after Thaw. A phone whose network changed never hears of
// the relay's close; tests/e2e freezes the proxy to make such a socket.
func TestFreezeHoldsTheClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := NewProxy(t, ln.Addr().String())
	peer, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
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

	// No end while frozen. (The wait only
	// bounds the check: a close let through late would pass it, never fail
	// it falsely.)
	peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := peer.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("while frozen the peer read %q, %v; want nothing", buf[:n], err)
	}

	p.Thaw()
	peer.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := peer.Read(buf); err != io.EOF {
		t.Fatalf("after the thaw the peer read %q, %v; want the end", buf[:n], err)
	}
}

// A dial while frozen is held, not refused: a client that gave a silent
// socket up and dials again meets the same silence, and its bytes go
// through once the network is back. (A refused dial is a report of its own
// in a browser: Firefox logs it as an error of the page.)
func TestFreezeHoldsNewDials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := NewProxy(t, ln.Addr().String())
	p.Freeze()
	peer, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write([]byte{7}); err != nil {
		t.Fatal(err)
	}

	// Not closed while frozen (the wait bounds the check, as above).
	peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := peer.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a dial while frozen read %q, %v; want nothing", buf[:n], err)
	}

	p.Thaw()
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	up.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(up, buf[:1]); err != nil || buf[0] != 7 {
		t.Fatalf("after the thaw the relay read %v, %v; want the byte sent while frozen", buf[:1], err)
	}
}
