//go:build !js

package client_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/wasm/client"
	"github.com/relaywasm/relaywasm/wasm/client/clienttest"
)

// benchFrames and benchSize make each measured stream: 2,000 ACP messages of
// about 1 KiB, the shape of a long agent answer.
const (
	benchFrames = 2000
	benchSize   = 1024
)

// BenchmarkInbound streams the same prompt through the engine and through a
// plain coder/websocket read loop on the same relay and runtime, alternating
// run by run, and reports both rates and their ratio. The plain loop does the
// least a client can: read each message and look for the end of the turn.
//
//	go test -run '^$' -bench Inbound -benchtime 20x ./wasm/client/
func BenchmarkInbound(b *testing.B) {
	env := relaytest.Start(b, nil)
	env.StartRuntime(b, nil)
	plain := newPlainReader(b, env)
	eng := newEngineReader(b, env)
	var plainTime, engineTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plainTime += plain.stream(b, i)
		engineTime += eng.stream(b, i)
	}
	frames := float64(b.N * benchFrames)
	b.ReportMetric(frames/plainTime.Seconds(), "plain-frames/s")
	b.ReportMetric(frames/engineTime.Seconds(), "engine-frames/s")
	b.ReportMetric(plainTime.Seconds()/engineTime.Seconds(), "engine/plain")
}

var endOfTurn = []byte(`"stopReason"`)

func prompt(session string, id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":%s}`,
		100+id, promptParams(session, fmt.Sprintf("count %d size %d", benchFrames-1, benchSize)))
}

type plainReader struct {
	br      *relaytest.Browser
	session string
}

func newPlainReader(b *testing.B, env *relaytest.Env) *plainReader {
	br := env.Attach(b, "")
	session, err := br.StartChat()
	if err != nil {
		b.Fatal(err)
	}
	return &plainReader{br: br, session: session}
}

func (p *plainReader) stream(b *testing.B, i int) time.Duration {
	start := time.Now()
	if err := p.br.ACP(prompt(p.session, i)); err != nil {
		b.Fatal(err)
	}
	for {
		msg, err := p.br.ReadRaw()
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(msg, endOfTurn) {
			return time.Since(start)
		}
	}
}

type engineReader struct {
	a       *client.Attachment
	done    chan struct{}
	session string
}

func newEngineReader(b *testing.B, env *relaytest.Env) *engineReader {
	e := &engineReader{done: make(chan struct{}, 1)}
	c := clienttest.NewCollector()
	var chatting atomic.Bool
	chatting.Store(true)
	o := client.Options{
		URL: env.AttachURL, Instance: env.Instance, RelayKey: env.Key,
		Credential: func(context.Context) (string, error) { return env.ClientToken, nil },
		OnMessages: func(_ context.Context, batch []client.Message) (int, error) {
			for _, m := range batch {
				if chatting.Load() {
					c.OnMessage(m)
				} else if bytes.Contains(m.Payload, endOfTurn) {
					e.done <- struct{}{}
				}
			}
			return len(batch), nil
		},
	}
	a, err := client.Attach(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	e.a = a
	e.session = startChat(b, c, a)
	chatting.Store(false)
	return e
}

func (e *engineReader) stream(b *testing.B, i int) time.Duration {
	start := time.Now()
	if err := e.a.SendACP(context.Background(), []byte(prompt(e.session, i))); err != nil {
		b.Fatal(err)
	}
	<-e.done
	return time.Since(start)
}
