//go:build !js

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// Options no hello can carry are refused by Attach at once, as ErrBadOptions,
// and nothing is dialled; before, the relay refused every hello and the
// attachment redialled for ever, blaming the relay (ErrProtocol). The dial
// goes to a real relay, which is reached only if the options pass.
func TestOptionsRefuseWhatNoHelloCarries(t *testing.T) {
	s := newStack(t, nil, nil)
	for name, edit := range map[string]func(*client.Options){
		"instance too long":     func(o *client.Options) { o.Instance = strings.Repeat("i", librelay.MaxIDBytes+1) },
		"instance control char": func(o *client.Options) { o.Instance = "test\n" },
		"instance NUL":          func(o *client.Options) { o.Instance = "te\x00st" },
		"instance not UTF-8":    func(o *client.Options) { o.Instance = "te\xffst" },
		"agent too long":        func(o *client.Options) { o.Agent = strings.Repeat("a", librelay.MaxIDBytes+1) },
		"agent control char":    func(o *client.Options) { o.Agent = "relay\twasm" },
	} {
		t.Run(name, func(t *testing.T) {
			o := s.options(client.NewMemoryStore(), nil)
			o.OnMessage = func(client.Message) error { return nil }
			o.OnEvicted, o.OnState = nil, nil
			edit(&o)
			dials := s.front.Accepted()
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			a, err := client.Attach(ctx, o)
			if err == nil {
				a.Close()
			}
			if !errors.Is(err, client.ErrBadOptions) {
				t.Fatalf("Attach: %v, want ErrBadOptions", err)
			}
			if n := s.front.Accepted() - dials; n != 0 {
				t.Fatalf("%d dials for options no hello can carry", n)
			}
		})
	}
	// At the limit, a hello is carried: an Agent of MaxIDBytes, which JSON
	// escapes to twice that.
	o := s.options(client.NewMemoryStore(), nil)
	o.OnMessage = func(client.Message) error { return nil }
	o.OnEvicted, o.OnState = nil, nil
	o.Agent = strings.Repeat("\u2028", librelay.MaxIDBytes/3)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	a, err := client.Attach(ctx, o)
	if err != nil {
		t.Fatalf("Attach with an Agent of MaxIDBytes: %v", err)
	}
	a.Close()
}
