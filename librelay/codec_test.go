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
		`{"type":"c"}` + "\n"
	got, err := readAll(NewReader(strings.NewReader(in)))
	if err != io.EOF {
		t.Fatalf("err = %v", err)
	}
	want := []Frame{{Type: "a", ID: "1"}, {Type: "b"}, {Type: "c"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestReaderReadsAsTheReference pins the readings where this Reader once
// differed from the reference Reader (contenox v1.0.0's librelay): each row
// is a stream and what ReadFrame returns, call by call, until an error that
// ends it.
func TestReaderReadsAsTheReference(t *testing.T) {
	a := `{"type":"a"}`
	tests := []struct {
		name string
		in   string
		want []error // nil is a frame
	}{
		// A last line without a newline is a truncated frame, not a frame.
		{"last line without newline", a + "\n" + a, []error{nil, io.ErrUnexpectedEOF, io.EOF, io.EOF}},
		{"only line without newline", a, []error{io.ErrUnexpectedEOF, io.EOF}},
		{"truncated garbage", "{\"type\":", []error{io.ErrUnexpectedEOF, io.EOF}},
		{"truncated after CR", a + "\r", []error{io.ErrUnexpectedEOF, io.EOF}},
		{"blank last line without newline", a + "\n  \t", []error{nil, io.EOF}},
		{"unicode blank last line without newline", a + "\n\u00a0", []error{nil, io.EOF}},
		// Lines of only Unicode whitespace (bytes.TrimSpace's) are skipped,
		// \v and \f included though JSON does not count them as space.
		{"NEL line", "\u0085\n" + a + "\n", []error{nil, io.EOF}},
		{"NBSP line", "\u00a0\u00a0\r\n" + a + "\n", []error{nil, io.EOF}},
		{"ideographic space line", "\u3000\n" + a + "\n", []error{nil, io.EOF}},
		{"VT and FF line", "\v\f \n" + a + "\n", []error{nil, io.EOF}},
		{"line separator line", "\u2028\u2029\n" + a + "\n", []error{nil, io.EOF}},
		// Unicode whitespace around a frame is not JSON whitespace: malformed.
		{"NBSP before a frame", "\u00a0" + a + "\n", []error{ErrMalformedFrame, io.EOF}},
		{"VT after a frame", a + "\v\n", []error{ErrMalformedFrame, io.EOF}},
		// A non-space rune is not blank.
		{"ZWSP line", "\u200b\n" + a + "\n", []error{ErrMalformedFrame, nil, io.EOF}},
		{"invalid UTF-8 line", "\xff\n" + a + "\n", []error{ErrMalformedFrame, nil, io.EOF}},
		// Identifiers: C1 controls are carried, invalid UTF-8 reads as U+FFFD.
		{"C1 in instance", `{"type":"a","instance":"\u0085"}` + "\n", []error{nil, io.EOF}},
		{"raw C1 in session", "{\"type\":\"a\",\"instance\":\"i\",\"session\":\"\u0080\u009f\"}\n", []error{nil, io.EOF}},
		{"invalid UTF-8 in type", "{\"type\":\"a\xff\"}\n", []error{nil, io.EOF}},
		{"C0 escaped in id", `{"type":"a","id":"\u001f"}` + "\n", []error{ErrControlChar, io.EOF}},
		{"DEL in re", "{\"type\":\"a\",\"re\":\"\x7f\"}\n", []error{ErrControlChar, io.EOF}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			for i, want := range tt.want {
				f, err := r.ReadFrame()
				if want == nil && err != nil || !errors.Is(err, want) {
					t.Fatalf("read %d: %+v, %v; want %v", i, f, err, want)
				}
				if want == io.EOF && err != io.EOF || want == io.ErrUnexpectedEOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("read %d: %v is not the sentinel itself", i, err)
				}
			}
		})
	}
}

// TestReaderDecodesInvalidUTF8 checks the value, not only the acceptance:
// invalid UTF-8 in any string member becomes U+FFFD, as encoding/json makes
// it, and the frame is valid.
func TestReaderDecodesInvalidUTF8(t *testing.T) {
	in := "{\"type\":\"t\xff\",\"instance\":\"\xc3\",\"session\":\"\xed\xa0\x80\",\"id\":\"\\u00e9\xfe\"}\n"
	f, err := NewReader(strings.NewReader(in)).ReadFrame()
	want := Frame{Type: "t\ufffd", Instance: "\ufffd", Session: "\ufffd\ufffd\ufffd", ID: "é\ufffd"}
	if err != nil || !reflect.DeepEqual(f, want) {
		t.Fatalf("got %+v, %v; want %+v", f, err, want)
	}
	var ref Frame
	if err := json.Unmarshal([]byte(in), &ref); err != nil || !reflect.DeepEqual(ref, want) {
		t.Fatalf("encoding/json reads %+v, %v", ref, err)
	}
	// 86 invalid bytes become 258 bytes of U+FFFD: over MaxIDBytes after
	// decoding, which is where the reference measures it.
	in = `{"type":"t","instance":"` + strings.Repeat("\xff", 86) + "\"}\n"
	if _, err := NewReader(strings.NewReader(in)).ReadFrame(); !errors.Is(err, ErrIDTooLong) {
		t.Fatalf("86 invalid bytes: %v, want ErrIDTooLong", err)
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
	// end): at most the limit and one byte past the first frame.
	if max := int64(len(head) + MaxFrameBytes + 1); src.n > max {
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

// TestReaderLimitBoundary: MaxFrameBytes counts the whole line, its newline
// (and CR) included, as the reference Reader counts it.
func TestReaderLimitBoundary(t *testing.T) {
	skipUnderRace(t)
	frame := func(n int) string { // a frame of n bytes
		return `{"type":"x","payload":"` + strings.Repeat("a", n-len(`{"type":"x","payload":""}`)) + `"}`
	}
	next := `{"type":"y"}` + "\n"
	tests := []struct {
		name string
		line string
		want error
	}{
		{"LF, exactly the limit", frame(MaxFrameBytes-1) + "\n", nil},
		{"CRLF, exactly the limit", frame(MaxFrameBytes-2) + "\r\n", nil},
		{"space and LF, exactly the limit", frame(MaxFrameBytes-3) + "  \n", nil},
		{"LF, one over", frame(MaxFrameBytes) + "\n", ErrFrameTooLarge},
		{"CRLF, one over", frame(MaxFrameBytes-1) + "\r\n", ErrFrameTooLarge},
		{"blank line, one over", strings.Repeat(" ", MaxFrameBytes) + "\n", ErrFrameTooLarge},
		// Without a newline the count is of the bytes there are: the limit
		// itself is a truncated frame, one more byte is too large.
		{"truncated at the limit", frame(MaxFrameBytes), io.ErrUnexpectedEOF},
		{"truncated one over", frame(MaxFrameBytes + 1), ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.line
			if strings.HasSuffix(in, "\n") {
				in += next
			}
			r := NewReader(strings.NewReader(in))
			_, err := r.ReadFrame()
			if err != tt.want {
				t.Fatalf("%d bytes: %v, want %v", len(tt.line), err, tt.want)
			}
			switch tt.want {
			case nil:
				if f, err := r.ReadFrame(); err != nil || f.Type != "y" {
					t.Fatalf("next frame: %+v, %v", f, err)
				}
			case ErrFrameTooLarge:
				if _, err := r.ReadFrame(); err != ErrReaderClosed {
					t.Fatalf("after: %v", err)
				}
			}
		})
	}
}

// TestWriterLimitIsTheReaderLimit: the longest frame Writer writes is
// MaxFrameBytes with its newline, which a Reader accepts; one byte more is
// refused before anything is written.
func TestWriterLimitIsTheReaderLimit(t *testing.T) {
	skipUnderRace(t)
	pad := MaxFrameBytes - 1 - len(`{"type":"x","payload":""}`)
	var buf bytes.Buffer
	w := NewWriter(&buf)
	f := Frame{Type: "x", Payload: json.RawMessage(`"` + strings.Repeat("a", pad) + `"`)}
	if err := w.WriteFrame(f); err != nil || buf.Len() != MaxFrameBytes {
		t.Fatalf("largest frame: %d bytes written, %v", buf.Len(), err)
	}
	if _, err := NewReader(bytes.NewReader(buf.Bytes())).ReadFrame(); err != nil {
		t.Fatalf("reading the largest frame: %v", err)
	}
	buf.Reset()
	f.Payload = json.RawMessage(`"` + strings.Repeat("a", pad+1) + `"`)
	if err := w.WriteFrame(f); !errors.Is(err, ErrFrameTooLarge) || buf.Len() != 0 {
		t.Fatalf("one byte more: %d bytes written, %v", buf.Len(), err)
	}
	if _, err := AppendFrame(nil, &f); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("AppendFrame of a MaxFrameBytes encoding: %v", err)
	}
	if _, err := ParseFrame(append(bytes.Clone([]byte(`{"type":"x","payload":"`)), strings.Repeat("a", pad+1)+`"}`...)); err != ErrFrameTooLarge {
		t.Fatalf("ParseFrame of a MaxFrameBytes frame: %v", err)
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

// skipUnderRace skips a test of frames at MaxFrameBytes under the race
// detector, which has nothing to find in it (it runs on one goroutine) and
// makes it many times slower: the two such tests took 20 s there (1.6 s
// without), and librelay 32 s with them, 7 s without. make test runs
// librelay without the race detector as well.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("frames of MaxFrameBytes on one goroutine: run without -race (make test does)")
	}
}
