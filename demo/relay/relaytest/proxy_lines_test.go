package relaytest

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// RecordLines keeps what the dialling peer sends, a line once its newline
// has gone through (a line may come in pieces), and nothing the upstream
// sends back.
func TestRecordLines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := NewProxy(t, ln.Addr().String(), RecordLines())
	peer := dial(t, p.Addr())
	if _, err := peer.Write([]byte("GET / HTTP/1.1\nhalf")); err != nil {
		t.Fatal(err)
	}
	up, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if !p.WaitLine("GET", time.Minute) {
		t.Fatalf("the first line was not recorded: %q", p.Lines())
	}
	if _, err := up.Write([]byte("from upstream\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(peer, make([]byte, len("from upstream\n"))); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte(" and half\n")); err != nil {
		t.Fatal(err)
	}
	if !p.WaitLine("half and half", time.Minute) {
		t.Fatalf("the line sent in two pieces was not recorded whole: %q", p.Lines())
	}
	if got, want := p.Lines(), []string{"GET / HTTP/1.1\n", "half and half\n"}; !slices.Equal(got, want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
}
