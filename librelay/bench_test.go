package librelay

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// benchFrame is a realistic cargo frame: an ACP session/update notification
// carrying an agent_message_chunk, about 1 KiB of payload with the escapes
// real model output has (quotes, newlines, a tab, non-ASCII).
func benchFrame() Frame {
	text := strings.Repeat(`Here is the plan: read \"config.yaml\", then\n\t- patch the handler (naïve → robust)\n`, 11)[:850]
	payload := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_01J9Z3K8Q4W7X2Y5V6B1N0M3","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}}`
	return Frame{
		Type: TypeACPMessage, Instance: "inst_7f3a9c2e", Session: "att_9b8e7d6c5b4a39281706f5e4d3c2b1a0",
		Seq: 184467, Trace: "tr-Q2xhdWRlIHdhcyBoZXJl", Payload: json.RawMessage(payload),
	}
}

// baseline times fn over n iterations outside the benchmark's clock, so a
// librelay benchmark can report its speed relative to encoding/json measured
// in the same process, on the same input, with the same iteration count.
func baseline(b *testing.B, n int, fn func()) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	fn() // warm up
	start := time.Now()
	for range n {
		fn()
	}
	return time.Since(start)
}

// reportRatio reports how many times faster librelay ran than the baseline.
func reportRatio(b *testing.B, n int, ours, base time.Duration) {
	if n == 0 || ours <= 0 {
		return
	}
	b.ReportMetric(float64(base.Nanoseconds())/float64(n), "json-ns/op")
	b.ReportMetric(float64(base)/float64(ours), "x-vs-json")
}

func jsonWriteLine(w io.Writer, f *Frame) {
	line, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(append(line, '\n'))
}

func BenchmarkWriteFrame(b *testing.B) {
	f := benchFrame()
	line, _ := AppendFrame(nil, &f)
	b.Run("librelay", func(b *testing.B) {
		w := NewWriter(io.Discard)
		b.SetBytes(int64(len(line) + 1))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if err := w.WriteFrame(f); err != nil {
				b.Fatal(err)
			}
			n++
		}
		ours := b.Elapsed()
		reportRatio(b, n, ours, baseline(b, n, func() { jsonWriteLine(io.Discard, &f) }))
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(line) + 1))
		b.ReportAllocs()
		for b.Loop() {
			jsonWriteLine(io.Discard, &f)
		}
	})
}

// cycleReader serves data over and over.
type cycleReader struct {
	data []byte
	off  int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

func BenchmarkReadFrame(b *testing.B) {
	f := benchFrame()
	line, _ := AppendFrame(nil, &f)
	line = append(line, '\n')
	stream := []byte(strings.Repeat(string(line), 64))
	jsonRead := func() {
		var out Frame
		if err := json.Unmarshal(line, &out); err != nil {
			panic(err)
		}
	}
	b.Run("librelay", func(b *testing.B) {
		r := NewReader(&cycleReader{data: stream})
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if _, err := r.ReadFrame(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		ours := b.Elapsed()
		reportRatio(b, n, ours, baseline(b, n, jsonRead))
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			jsonRead()
		}
	})
}

func BenchmarkParseFrame(b *testing.B) {
	f := benchFrame()
	msg, _ := AppendFrame(nil, &f)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := ParseFrame(msg); err != nil {
			b.Fatal(err)
		}
		n++
	}
	ours := b.Elapsed()
	reportRatio(b, n, ours, baseline(b, n, func() {
		var out Frame
		if err := json.Unmarshal(msg, &out); err != nil {
			panic(err)
		}
	}))
}

func BenchmarkAppendFrame(b *testing.B) {
	f := benchFrame()
	buf, _ := AppendFrame(nil, &f)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], &f); err != nil {
			b.Fatal(err)
		}
		n++
	}
	ours := b.Elapsed()
	reportRatio(b, n, ours, baseline(b, n, func() {
		if _, err := json.Marshal(&f); err != nil {
			panic(err)
		}
	}))
}

// BenchmarkHelloWelcome covers the handshake payloads' hand-written JSON.
func BenchmarkHelloWelcome(b *testing.B) {
	nonce, _ := NewNonce()
	h := Hello{ProtocolVersion: ProtocolVersion, Instance: "inst_7f3a9c2e", Agent: "relaywasm/0.1", Nonce: nonce}
	wire, _ := Welcome{ProtocolVersion: 1, Relay: "dev-relay/0.1", Signature: make([]byte, 64), RetryAfterSeconds: 5}.MarshalJSON()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := h.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
		var w Welcome
		if err := w.UnmarshalJSON(wire); err != nil {
			b.Fatal(err)
		}
		n++
	}
	ours := b.Elapsed()
	reportRatio(b, n, ours, baseline(b, n, func() {
		if _, err := json.Marshal(plainHello(h)); err != nil {
			panic(err)
		}
		var w plainWelcome
		if err := json.Unmarshal(wire, &w); err != nil {
			panic(err)
		}
	}))
}
