//go:build !js

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/wasm/client"
)

// A URL that no WebSocket can be dialled at (another scheme, not a URL,
// relative, no host, a port out of range) ends Attach with ErrBadOptions at
// once, naming it, with the default transport. Before, the attachment
// redialled it as unreachable ("unexpected url scheme") until its context
// ended. The context here is the tests' generous limit, so an Attach that
// redials fails the test by returning something else when it runs out.
func TestAttachRefusesAURLNoWebSocketTakes(t *testing.T) {
	for _, url := range []string{
		"ftp://x",
		"not a url",
		"/v1/attach",
		"relay.example/v1/attach",
		"https://relay.example/v1/attach",
		"ws://",
		"ws://relay example/v1/attach",
		"ws://127.0.0.1:99999/v1/attach",
		"ws://[::1/v1/attach",
		"ws://[::1]x/v1/attach",
		"ws://[relay]/v1/attach",
		"ws://relay.example:80:80/v1/attach",
		"ws://relay|example/v1/attach",
	} {
		t.Run(url, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			_, err := client.Attach(ctx, urlOptions(url, nil))
			if !errors.Is(err, client.ErrBadOptions) || !strings.Contains(err.Error(), url) {
				t.Fatalf("Attach to %q: %v, want ErrBadOptions naming the URL", url, err)
			}
		})
	}
}

// The URLs a relay is reached at are dialled as they are: ws and wss, in
// any case, with or without a port, and whatever the browser's URL parser
// takes.
func TestAttachDialsAWebSocketURL(t *testing.T) {
	for _, url := range []string{
		"ws://127.0.0.1:1/v1/attach",
		"wss://relay.example/v1/attach",
		"WSS://relay.example:443/v1/attach?x=1",
		"ws://[::1]:8080/v1/attach",
		"ws://[::1]/v1/attach",
		"wss://user:secret@relay.example/v1/attach",
		// What the browser's URL parser takes and Go's would not: the
		// check leaves them to the browser, which relay.js asked first.
		"ws://relay.example/v1/%zz",
		"ws:/relay.example/v1/attach",
	} {
		t.Run(url, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			dialled := make(chan string, 1)
			_, err := client.Attach(ctx, urlOptions(url, dialOnce{dialled, cancel}))
			select {
			case got := <-dialled:
				if got != url {
					t.Fatalf("dialled %q, want %q", got, url)
				}
			default:
				t.Fatalf("Attach to %q returned %v without dialling", url, err)
			}
		})
	}
}

// urlOptions are options for an attach to url, through transport (nil: the
// default).
func urlOptions(url string, transport client.Transport) client.Options {
	return client.Options{
		URL: url, Instance: "i", Transport: transport,
		Credential: func(context.Context) (string, error) { return "t", nil },
		OnMessage:  func(client.Message) error { return nil },
	}
}

// dialOnce tells the URL it is asked to dial and ends the attach.
type dialOnce struct {
	dialled chan<- string
	end     context.CancelFunc
}

func (d dialOnce) Dial(ctx context.Context, url string, _ []string) (client.Conn, error) {
	select {
	case d.dialled <- url:
	default:
	}
	d.end()
	return nil, errors.New("not dialled in this test")
}
