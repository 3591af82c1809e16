package relay

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
)

// pendingConns counts the connections not yet upgraded, in all and per
// client address (Limits.PendingConns, PendingConnsPerAddress;
// ConfigureServer). net/http reports a connection's first state from its
// accept loop and the later ones from the connection's goroutine, so the
// counts are behind a mutex, held for a map update and never for I/O.
type pendingConns struct {
	mu     sync.Mutex
	conns  map[net.Conn]netip.Addr // admitted, not yet upgraded or closed
	byAddr map[netip.Addr]int      // of conns, per clientAddr
}

// admit counts c, or returns the response that refuses it. A refused
// connection is not counted at all, so connections refused to one address
// take no place from anyone else, however fast they come.
func (p *pendingConns) admit(c net.Conn, l Limits) (refusal []byte) {
	addr, perAddr := clientAddr(c.RemoteAddr())
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(p.conns) >= l.PendingConns:
		return busyResponse
	case perAddr && p.byAddr[addr] >= l.PendingConnsPerAddress:
		return addressBusyResponse
	}
	if p.conns == nil {
		p.conns, p.byAddr = make(map[net.Conn]netip.Addr), make(map[netip.Addr]int)
	}
	p.conns[c] = addr
	if perAddr {
		p.byAddr[addr]++
	}
	return nil
}

// release uncounts c, if admit counted it.
func (p *pendingConns) release(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	addr, ok := p.conns[c]
	if !ok {
		return
	}
	delete(p.conns, c)
	if n := p.byAddr[addr] - 1; n > 0 {
		p.byAddr[addr] = n
	} else {
		delete(p.byAddr, addr)
	}
}

// clientAddr is what a connection from a counts under for
// Limits.PendingConnsPerAddress: its IPv4 address (an IPv4-mapped IPv6
// address as IPv4), or its IPv6 address's /64, the least one IPv6 host is
// routed (one with a /64 has 2^64 addresses to dial from). ok is false for
// a peer that has no IP address (a Unix socket's): it counts in
// PendingConns only. The address is the connection's own, never a header's
// (X-Forwarded-For and the like): the count is taken before any byte is
// read, and anyone can send such a header.
func clientAddr(a net.Addr) (addr netip.Addr, ok bool) {
	ta, isTCP := a.(*net.TCPAddr)
	if !isTCP {
		return netip.Addr{}, false
	}
	addr = ta.AddrPort().Addr().Unmap().WithZone("")
	if addr.Is6() {
		addr = netip.PrefixFrom(addr, 64).Masked().Addr()
	}
	return addr, addr.IsValid()
}

// busyResponse and addressBusyResponse are what a connection past
// Limits.PendingConns, or past PendingConnsPerAddress from its client's
// address, gets. The body says which, for whoever reads it (a browser does
// not show it, but its client redials with backoff as after any drop).
var (
	busyResponse        = refusal("the relay has too many connections not yet upgraded; retry")
	addressBusyResponse = refusal("too many connections not yet upgraded from your address; retry")
)

func refusal(why string) []byte {
	why += "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(why)) + "\r\n\r\n" + why)
}
