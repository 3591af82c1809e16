package librelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// readAll reads frames until an error, returning the frames and the error.
func readAll(r *Reader) ([]Frame, error) {
	var out []Frame
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

func TestWriterReaderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	frames := wireFrames()
	for _, f := range frames {
		if err := w.WriteFrame(f); err != nil {
			t.Fatalf("WriteFrame(%+v): %v", f, err)
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(frames) {
		t.Fatalf("%d newlines for %d frames:\n%s", n, len(frames), buf.Bytes())
	}
	got, err := readAll(NewReader(&buf))
	if err != io.EOF {
		t.Fatalf("ReadFrame error %v, want io.EOF", err)
	}
	if len(got) != len(frames) {
		t.Fatalf("read %d frames, want %d", len(got), len(frames))
	}
	for i, f := range frames {
		want := f
		if len(want.Payload) > 0 {
			var c bytes.Buffer
			if err := json.Compact(&c, want.Payload); err != nil {
				t.Fatal(err)
			}
			want.Payload = c.Bytes()
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("frame %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
}

func TestWriterMatchesEncodingJSON(t *testing.T) {
	for _, f := range wireFrames() {
		var buf bytes.Buffer
		if err := NewWriter(&buf).WriteFrame(f); err != nil {
			t.Fatal(err)
		}
		if want := jsonLine(t, f); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("WriteFrame:\n got %s\nwant %s", buf.Bytes(), want)
		}
	}
}

func TestReaderReadsEncodingJSON(t *testing.T) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // HTML escaping on: \u003c etc. must decode
	for _, f := range wireFrames() {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	r := NewReader(&buf)
	for {
		var want Frame
		werr := dec.Decode(&want)
		got, err := r.ReadFrame()
		if werr == io.EOF && err == io.EOF {
			return
		}
		if err != nil || werr != nil {
			t.Fatalf("ReadFrame: %v; encoding/json: %v", err, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	}
}

func TestReaderLines(t *testing.T) {
	in := "\n\r\n" +
		`{"type":"a","id":"1"}` + "\r\n" +
		"   \t \n" +
		`{"type":"b","unknown":{"x":[1,2]},"future":"ignored"}` + "\n" +
		"\n\n" +
		`{"type":"c"}` // no final newline
	got, err := readAll(NewReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatalf("err = %v", err)
	}
	want := []Frame{{Type: "a", ID: "1"}, {Type: "b"}, {Type: "c"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestReaderBadLineIsConsumed(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"good1"}`,
		`{"type":`,                       // malformed
		`not json at all`,                // malformed
		`{"type":""}`,                    // invalid: empty type
		`{"type":"x","id":"1","re":"2"}`, // invalid: both ids
		`{"type":5}`,                     // wrong type
		`{"type":"x","seq":-1}`,          // negative seq
		`{"type":"x","seq":1.5}`,         // fractional seq
		`{"type":"x"} trailing`,          // trailing garbage
		`{"type":"good2"}`,
	}, "\n") + "\n"
	r := NewReader(strings.NewReader(in))
	wantErrs := []error{nil, ErrMalformedFrame, ErrMalformedFrame, ErrEmptyType, ErrBothIDs,
		ErrMalformedFrame, ErrMalformedFrame, ErrMalformedFrame, ErrMalformedFrame, nil}
	for i, want := range wantErrs {
		f, err := r.ReadFrame()
		if want == nil && err != nil || !errors.Is(err, want) {
			t.Fatalf("line %d: err %v, want %v", i, err, want)
		}
		if err != nil && !reflect.DeepEqual(f, Frame{}) {
			t.Fatalf("line %d: a failed read returned %+v", i, f)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last line: %v", err)
	}
}

// countingReader counts the bytes handed out.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// endless yields one byte forever.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

func TestReaderTooLarge(t *testing.T) {
	head := `{"type":"ok"}` + "\n"
	src := &countingReader{r: io.MultiReader(strings.NewReader(head+`{"type":"x","payload":"`), endless('a'))}
	r := NewReader(src)
	if f, err := r.ReadFrame(); err != nil || f.Type != "ok" {
		t.Fatalf("first frame: %+v, %v", f, err)
	}
	if _, err := r.ReadFrame(); err != ErrFrameTooLarge {
		t.Fatalf("long line: %v, want ErrFrameTooLarge", err)
	}
	// The limit is enforced without reading the rest (here: there is no
	// end): at most the limit, its CR and one byte past the first frame.
	if max := int64(len(head) + MaxFrameBytes + 2); src.n > max {
		t.Fatalf("read %d bytes, more than %d", src.n, max)
	}
	read := src.n
	for range 3 {
		if _, err := r.ReadFrame(); err != ErrReaderClosed {
			t.Fatalf("after ErrFrameTooLarge: %v, want ErrReaderClosed", err)
		}
	}
	if src.n != read {
		t.Fatal("a closed Reader kept reading")
	}
}

func TestReaderLimitBoundary(t *testing.T) {
	// A frame of exactly MaxFrameBytes passes, with LF or CRLF.
	pad := MaxFrameBytes - len(`{"type":"x","payload":""}`)
	exact := `{"type":"x","payload":"` + strings.Repeat("a", pad) + `"}`
	for _, eol := range []string{"\n", "\r\n", ""} {
		r := NewReader(strings.NewReader(exact + eol))
		if f, err := r.ReadFrame(); err != nil || len(f.Payload) != pad+2 {
			t.Fatalf("exact limit with %q: %v", eol, err)
		}
	}
	over := `{"type":"x","payload":"` + strings.Repeat("a", pad+1) + `"}`
	for _, eol := range []string{"\n", "\r\n", ""} {
		r := NewReader(strings.NewReader(over + eol + `{"type":"y"}` + "\n"))
		if _, err := r.ReadFrame(); err != ErrFrameTooLarge {
			t.Fatalf("one over the limit with %q: %v", eol, err)
		}
		if _, err := r.ReadFrame(); err != ErrReaderClosed {
			t.Fatalf("after: %v", err)
		}
	}
}

// errReader fails after its data.
type errReader struct {
	data []byte
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReaderSourceError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(&errReader{data: []byte(`{"type":"a"}` + "\n"), err: boom})
	if f, err := r.ReadFrame(); err != nil || f.Type != "a" {
		t.Fatalf("%+v %v", f, err)
	}
	for range 2 {
		if _, err := r.ReadFrame(); err != boom {
			t.Fatalf("err = %v, want the source's", err)
		}
	}
	// A source that never makes progress is reported, not spun on.
	r = NewReader(&errReader{data: nil, err: nil})
	if _, err := r.ReadFrame(); err != io.ErrNoProgress {
		t.Fatalf("empty reads: %v", err)
	}
}

// oneByteReader hands out a byte at a time, so lines span many reads.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestReaderSplitReads(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range 50 {
		if err := w.WriteFrame(Frame{Type: "t", Seq: uint64(i + 1), Payload: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readAll(NewReader(oneByteReader{&buf}))
	if err != io.EOF || len(got) != 50 || got[49].Seq != 50 {
		t.Fatalf("%d frames, %v", len(got), err)
	}
}

// countingWriter records each Write.
type countingWriter struct {
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func TestWriterFailsClosed(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	bad := []Frame{
		{},
		{Type: "x", ID: "1", ReplyTo: "2"},
		{Type: "x", Session: "s"},
		{Type: "x", Instance: "a\nb"},
		{Type: "x", Payload: json.RawMessage(`{"a":`)},
		{Type: "x", Payload: json.RawMessage(`{} {}`)},
		{Type: "x", Payload: json.RawMessage(`  `)},
		{Type: "x", Payload: json.RawMessage("\"a\nb\"")}, // raw newline inside a string
		{Type: "x", Trace: "bad trace"},
	}
	for _, f := range bad {
		if err := w.WriteFrame(f); err == nil {
			t.Errorf("WriteFrame(%+v) succeeded", f)
		}
	}
	if len(cw.writes) != 0 {
		t.Fatalf("invalid frames wrote %q", cw.writes)
	}
	if err := w.WriteFrame(Frame{Type: "ok", Payload: json.RawMessage("{\n\"a\": [1,\n2]\n}")}); err != nil {
		t.Fatal(err)
	}
	if len(cw.writes) != 1 || string(cw.writes[0]) != `{"type":"ok","payload":{"a":[1,2]}}`+"\n" {
		t.Fatalf("writes = %q, want one compacted line", cw.writes)
	}
}

func TestWriterNoHTMLEscaping(t *testing.T) {
	var buf bytes.Buffer
	f := Frame{Type: "<a>&", Payload: json.RawMessage(`"<b>&"`)}
	if err := NewWriter(&buf).WriteFrame(f); err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"<a>&","payload":"<b>&"}` + "\n"; buf.String() != want {
		t.Fatalf("got %s want %s", buf.String(), want)
	}
}

func TestWriterConcurrent(t *testing.T) {
	cw := &countingWriter{}
	w := NewWriter(cw)
	const goroutines, each = 16, 100
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				f := Frame{Type: TypeACPMessage, Instance: "i", Session: strconv.Itoa(g), Seq: uint64(i + 1),
					Payload: json.RawMessage(`{"g":` + strconv.Itoa(g) + `,"pad":"` + strings.Repeat("x", i*7) + `"}`)}
				if err := w.WriteFrame(f); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(cw.writes) != goroutines*each {
		t.Fatalf("%d writes for %d frames", len(cw.writes), goroutines*each)
	}
	frames, err := readAll(NewReader(bytes.NewReader(bytes.Join(cw.writes, nil))))
	if err != io.EOF || len(frames) != goroutines*each {
		t.Fatalf("read back %d frames, %v", len(frames), err)
	}
	next := map[string]uint64{}
	for _, f := range frames {
		if next[f.Session]+1 != f.Seq {
			t.Fatalf("session %s: seq %d after %d", f.Session, f.Seq, next[f.Session])
		}
		next[f.Session] = f.Seq
	}
}

func TestWriterPropagatesWriteError(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriter(failWriter{boom})
	if err := w.WriteFrame(Frame{Type: "x"}); err != boom {
		t.Fatalf("err = %v", err)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
