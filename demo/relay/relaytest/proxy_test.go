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
	// A byte through first: the proxy has taken the connection (a frozen
	// proxy refuses new ones), and is copying.
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
