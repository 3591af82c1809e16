package relay

import (
	"net"
	"testing"
)

// A client counts under its IPv4 address, however it is spelled, or under
// its IPv6 address's /64, so one host cannot pass the bound by dialling
// from the many addresses of its prefix; a peer without an IP address is
// counted in the total only.
func TestClientAddr(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string // "": not counted per address
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 1}, "127.0.0.2"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::9"), Port: 2}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 1, Zone: "eth0"}, "fe80::"},
		{&net.UnixAddr{Name: "@", Net: "unix"}, ""},
	} {
		got, ok := clientAddr(c.addr)
		if s := got.String(); (c.want == "") == ok || ok && s != c.want {
			t.Errorf("clientAddr(%v) = %s %v, want %q", c.addr, s, ok, c.want)
		}
	}
}
