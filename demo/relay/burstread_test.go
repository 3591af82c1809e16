package relay

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// tcpPair is a loopback TCP connection: the near end to read, the far end
// to write.
func tcpPair(t *testing.T) (near, far net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	far, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	near = <-accepted
	if near == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// A socket with data waiting is read in bursts larger than what the caller
// asks for, the bytes arrive intact and in order, and once they are consumed
// the socket holds no buffer — an idle socket costs none.
func TestBurstReaderHoldsNothingIdle(t *testing.T) {
	if !nonBlockingReads {
		t.Skip("no non-blocking reads on this platform")
	}
	near, far := tcpPair(t)
	r := newBurstReader(near)
	if !r.ok() {
		t.Fatal("a TCP connection should be read in bursts")
	}
	sent := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
	go far.Write(sent)
	var got []byte
	p := make([]byte, 16) // coder/websocket's reader asks for this little
	bursts, largest := 0, 0
	for len(got) < len(sent) {
		if r.buf == nil {
			bursts++
		}
		n, err := r.read(near, p)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, r.hi)
		got = append(got, p[:n]...)
	}
	if !bytes.Equal(got, sent) {
		t.Fatal("bytes read differ from bytes sent")
	}
	if r.buf != nil {
		t.Fatal("a socket with nothing left to read still holds a burst buffer")
	}
	if largest <= len(p) {
		t.Fatalf("largest read was %d bytes: reads are not taken in bursts", largest)
	}
	t.Logf("%d bytes in %d bursts, largest %d", len(sent), bursts, largest)
}

// The peer's close is io.EOF once everything sent has been read, and a read
// on a connection closed locally fails as net.ErrClosed (what cutNow relies
// on to end a reader).
func TestBurstReaderEnds(t *testing.T) {
	if !nonBlockingReads {
		t.Skip("no non-blocking reads on this platform")
	}
	near, far := tcpPair(t)
	r := newBurstReader(near)
	far.Write([]byte("last"))
	far.Close()
	got, err := io.ReadAll(readerFunc(func(p []byte) (int, error) { return r.read(near, p) }))
	if err != nil || string(got) != "last" {
		t.Fatalf("read %q, %v; want \"last\" then EOF", got, err)
	}

	near2, _ := tcpPair(t)
	r2 := newBurstReader(near2)
	done := make(chan error, 1)
	go func() {
		_, err := r2.read(near2, make([]byte, 16))
		done <- err
	}()
	near2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed connection: %v, want net.ErrClosed", err)
	}
}

type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
