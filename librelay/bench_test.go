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

// benchVsJSON runs ours as the benchmark and then base, encoding/json doing
// the same work, the same number of times outside the benchmark's clock, so
// the two are measured in one process on one input and the ratio is
// reported beside ns/op, MB/s and allocs/op (which are ours alone).
func benchVsJSON(b *testing.B, size int, ours func() error, base func()) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := ours(); err != nil {
			b.Fatal(err)
		}
		n++
	}
	elapsed := b.Elapsed()
	b.StopTimer()
	base() // warm up
	start := time.Now()
	for range n {
		base()
	}
	baseTime := time.Since(start)
	if n > 0 && elapsed > 0 {
		b.ReportMetric(float64(baseTime.Nanoseconds())/float64(n), "json-ns/op")
		b.ReportMetric(float64(baseTime)/float64(elapsed), "x-vs-json")
	}
}

// benchJSON is the baseline on its own, for its allocations and MB/s.
func benchJSON(b *testing.B, size int, base func()) {
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		base()
	}
}

func jsonWriteLine(w io.Writer, f *Frame) {
	line, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	_, _ = w.Write(append(line, '\n'))
}

func jsonParse(line []byte) {
	var out Frame
	if err := json.Unmarshal(line, &out); err != nil {
		panic(err)
	}
}

func BenchmarkWriteFrame(b *testing.B) {
	f := benchFrame()
	line, _ := AppendFrame(nil, &f)
	size := len(line) + 1
	base := func() { jsonWriteLine(io.Discard, &f) }
	b.Run("librelay", func(b *testing.B) {
		w := NewWriter(io.Discard)
		benchVsJSON(b, size, func() error { return w.WriteFrame(f) }, base)
	})
	b.Run("encoding_json", func(b *testing.B) { benchJSON(b, size, base) })
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
	base := func() { jsonParse(line) }
	b.Run("librelay", func(b *testing.B) {
		r := NewReader(&cycleReader{data: stream})
		benchVsJSON(b, len(line), func() error { _, err := r.ReadFrame(); return err }, base)
	})
	b.Run("encoding_json", func(b *testing.B) { benchJSON(b, len(line), base) })
}

func BenchmarkParseFrame(b *testing.B) {
	f := benchFrame()
	msg, _ := AppendFrame(nil, &f)
	benchVsJSON(b, len(msg), func() error { _, err := ParseFrame(msg); return err }, func() { jsonParse(msg) })
}

func BenchmarkAppendFrame(b *testing.B) {
	f := benchFrame()
	buf, _ := AppendFrame(nil, &f)
	ours := func() (err error) {
		buf, err = AppendFrame(buf[:0], &f)
		return err
	}
	benchVsJSON(b, len(buf), ours, func() {
		if _, err := json.Marshal(&f); err != nil {
			panic(err)
		}
	})
}

// BenchmarkHelloWelcome covers the handshake payloads' hand-written JSON.
func BenchmarkHelloWelcome(b *testing.B) {
	nonce, _ := NewNonce()
	h := Hello{ProtocolVersion: ProtocolVersion, Instance: "inst_7f3a9c2e", Agent: "relaywasm/0.1", Nonce: nonce}
	wire, _ := Welcome{ProtocolVersion: 1, Relay: "dev-relay/0.1", Signature: make([]byte, 64), RetryAfterSeconds: 5}.MarshalJSON()
	ours := func() error {
		if _, err := h.MarshalJSON(); err != nil {
			return err
		}
		var w Welcome
		return w.UnmarshalJSON(wire)
	}
	benchVsJSON(b, len(wire), ours, func() {
		if _, err := json.Marshal(plainHello(h)); err != nil {
			panic(err)
		}
		var w plainWelcome
		if err := json.Unmarshal(wire, &w); err != nil {
			panic(err)
		}
	})
}
