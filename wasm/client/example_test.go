//go:build !js

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	devstack "github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// A native Go program attaches to a runtime through a relay, speaks ACP and
// closes. Here the relay and the runtime are the demo's, started in the same
// process (as `go run ./demo` starts them); a real program would be given
// the relay's URL, the instance, a credential and the relay's public key.
func Example() {
	ctx := context.Background()
	dev, err := devstack.Start(ctx, devstack.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close()

	// The handler gets every ACP message once, in order; the cursor moves
	// past a message only once it returned nil.
	var mu sync.Mutex
	answered := make(chan json.RawMessage, 3)
	a, err := client.Attach(ctx, client.Options{
		URL:        dev.AttachURL(),
		Instance:   devstack.DefaultInstance,
		Credential: func(context.Context) (string, error) { return devstack.DefaultClientToken, nil },
		RelayKey:   dev.PublicKey(), // refuse a relay that cannot sign with it
		OnMessage: func(m client.Message) error {
			mu.Lock()
			defer mu.Unlock()
			var rpc struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Params struct {
					Update struct {
						Content struct{ Text string } `json:"content"`
					} `json:"update"`
				} `json:"params"`
			}
			if err := json.Unmarshal(m.Payload, &rpc); err != nil {
				return err
			}
			if text := rpc.Params.Update.Content.Text; text != "" {
				fmt.Println("agent:", text)
			}
			if rpc.ID != nil {
				answered <- rpc.Result
			}
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close() // the Store keeps the cursor; Detach would end the stream

	call := func(msg string) json.RawMessage {
		if err := a.SendACP(ctx, []byte(msg), client.WithTrace("example-1")); err != nil {
			fmt.Println(err)
		}
		return <-answered
	}
	call(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	var s struct{ SessionID string }
	json.Unmarshal(call(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`), &s)
	stop := call(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + s.SessionID + `","prompt":[{"type":"text","text":"ping"}]}}`)
	fmt.Println("stop:", strings.TrimSpace(string(stop)))
	fmt.Println("resumable:", a.Resumable())
	// Output:
	// agent: pong
	// stop: {"stopReason":"end_turn"}
	// resumable: true
}

// The zero MemoryStore is an empty store, ready to use, as the zero value
// of a sync.Mutex is; Options.Store defaults to a new one.
func ExampleMemoryStore() {
	var store client.MemoryStore
	k := client.Key{URL: "ws://127.0.0.1:8080/v1/attach", Instance: "demo", Name: "chat"}
	ctx := context.Background()
	store.Commit(ctx, k, client.Saved{Session: "a1", Cursor: 7}, []client.Entry{{Seq: 7, Payload: []byte(`{}`)}}, 100)
	saved, _ := store.Load(ctx, k)
	hist, _ := store.History(ctx, k)
	fmt.Println(saved.Session, saved.Cursor, len(hist))
	// Output: a1 7 1
}
