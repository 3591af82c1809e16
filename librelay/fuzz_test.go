package librelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Seed corpora live in testdata/fuzz/<Target>/ and run with every
// `go test`; `go test -fuzz=FuzzReadFrame ./librelay/` explores further.

// FuzzReadFrame feeds arbitrary bytes to a Reader. Nothing may panic; every
// frame it accepts must re-encode with Writer and read back equal; and the
// whole input, taken as one message, must be accepted by ParseFrame exactly
// when encoding/json (plus Validate) accepts it, with the same result.
func FuzzReadFrame(f *testing.F) {
	for _, fr := range wireFrames() {
		line, _ := AppendFrame(nil, &fr)
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStream(t, data)
		checkMessage(t, data)
	})
}

func checkStream(t *testing.T, data []byte) {
	r := NewReader(bytes.NewReader(data))
	for range 1000 {
		fr, err := r.ReadFrame()
		switch {
		case err == io.EOF || err == ErrReaderClosed:
			return
		case err != nil:
			if !reflect.DeepEqual(fr, Frame{}) {
				t.Fatalf("error %v with frame %+v", err, fr)
			}
			continue
		}
		checkRoundTrip(t, fr)
	}
}

// checkRoundTrip writes an accepted frame and reads it back.
func checkRoundTrip(t *testing.T, fr Frame) {
	var buf bytes.Buffer
	if err := NewWriter(&buf).WriteFrame(fr); err != nil {
		t.Fatalf("accepted frame %+v does not write: %v", fr, err)
	}
	back, err := NewReader(&buf).ReadFrame()
	if err != nil {
		t.Fatalf("written frame %q does not read: %v", buf.Bytes(), err)
	}
	want := fr
	if len(want.Payload) > 0 {
		var c bytes.Buffer
		if err := json.Compact(&c, want.Payload); err != nil {
			t.Fatalf("accepted payload %q is not JSON: %v", want.Payload, err)
		}
		want.Payload = c.Bytes()
	}
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, want)
	}
}

// checkMessage compares ParseFrame with encoding/json on one message.
func checkMessage(t *testing.T, data []byte) {
	got, err := ParseFrame(data)
	var want Frame
	refErr := json.Unmarshal(data, &want)
	if refErr == nil {
		refErr = want.Validate()
	}
	switch {
	case err == nil && refErr != nil:
		t.Fatalf("ParseFrame accepted %q, encoding/json: %v", data, refErr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("ParseFrame(%q):\n got %+v\nwant %+v", data, got, want)
	case err != nil && refErr == nil:
		t.Fatalf("ParseFrame(%q): %v; encoding/json accepts %+v", data, err, want)
	}
	if err == nil {
		checkNoAlias(t, bytes.Clone(data))
	}
}

// checkNoAlias parses msg, scribbles over it and expects the frame unchanged.
func checkNoAlias(t *testing.T, msg []byte) {
	fr, err := ParseFrame(msg)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Clone(fr.Payload)
	text := strings.Clone(fr.Type + fr.Instance + fr.Session + fr.ID + fr.ReplyTo + fr.Trace)
	for i := range msg {
		msg[i] ^= 0xff
	}
	if fr.Type+fr.Instance+fr.Session+fr.ID+fr.ReplyTo+fr.Trace != text || !bytes.Equal(fr.Payload, payload) {
		t.Fatalf("frame aliases its message")
	}
}

// FuzzValidate checks Validate against a straightforward restatement of the
// rules, and that AppendFrame agrees with Validate and with encoding/json.
func FuzzValidate(f *testing.F) {
	f.Add("acp.message", "inst", "sess", "id", "", uint64(7), "tr-x", []byte(`{"a":1}`))
	f.Add("", "", "s", "a", "b", uint64(0), "bad trace", []byte(nil))
	f.Add("x\x7f", "\u0085", "\xff", "", "", uint64(0), "", []byte("{\n}"))
	f.Fuzz(func(t *testing.T, typ, instance, session, id, re string, seq uint64, trace string, payload []byte) {
		fr := Frame{Type: typ, Instance: instance, Session: session, ID: id, ReplyTo: re, Seq: seq, Trace: trace, Payload: payload}
		err := fr.Validate()
		if want := refValidate(fr); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("Validate(%+v) = %v, want %v", fr, err, want)
		}
		line, aerr := AppendFrame([]byte("prefix"), &fr)
		if string(line[:6]) != "prefix" {
			t.Fatal("AppendFrame changed dst's prefix")
		}
		if err != nil {
			if aerr != err && aerr.Error() != err.Error() || len(line) != 6 {
				t.Fatalf("AppendFrame on an invalid frame: %q, %v (Validate %v)", line, aerr, err)
			}
			return
		}
		checkAppendAgainstJSON(t, fr, line[6:], aerr)
	})
}

// checkAppendAgainstJSON: AppendFrame succeeds exactly when encoding/json
// can encode the frame (the payload is valid JSON), with identical bytes.
func checkAppendAgainstJSON(t *testing.T, fr Frame, line []byte, err error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	refErr := enc.Encode(fr)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("AppendFrame(%+v) err %v, encoding/json err %v", fr, err, refErr)
	}
	if err != nil {
		return
	}
	if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(line, want) {
		t.Fatalf("AppendFrame:\n got %s\nwant %s", line, want)
	}
	back, perr := ParseFrame(line)
	if perr != nil {
		t.Fatalf("ParseFrame(AppendFrame) = %v", perr)
	}
	checkRoundTrip(t, back)
}

// refValidate restates Validate's rules and order with the standard library's
// own predicates, as the reference states them: trace before identifiers,
// and in each identifier a C0 control or DEL anywhere before invalid UTF-8.
func refValidate(f Frame) error {
	switch {
	case f.Type == "":
		return ErrEmptyType
	case len(f.Type) > MaxTypeBytes:
		return ErrTypeTooLong
	case f.ID != "" && f.ReplyTo != "":
		return ErrBothIDs
	case f.Session != "" && f.Instance == "":
		return ErrSessionAlone
	case len(f.Trace) > MaxTraceBytes:
		return ErrTraceTooLong
	case strings.Trim(f.Trace, TraceAlphabet) != "":
		return ErrTraceCharset
	}
	for i, v := range []string{f.Type, f.Instance, f.Session, f.ID, f.ReplyTo} {
		switch {
		case i > 0 && len(v) > MaxIDBytes:
			return ErrIDTooLong
		case strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return ErrControlChar
		case !utf8.ValidString(v):
			return ErrNotUTF8
		}
	}
	return nil
}

// FuzzControlJSON holds the control payloads' hand-written JSON methods to
// encoding/json in both directions.
func FuzzControlJSON(f *testing.F) {
	for i, in := range controlInputs {
		f.Add(byte(i), []byte(in))
	}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		newPair := controlPairs[int(kind)%len(controlPairs)]
		compareUnmarshal(t, data, newPair)
		ours, ref := newPair()
		if ours.(json.Unmarshaler).UnmarshalJSON(data) != nil {
			return
		}
		_ = json.Unmarshal(data, ref)
		out, err := reflect.ValueOf(ours).Elem().Interface().(json.Marshaler).MarshalJSON()
		if want := encodeNoHTML(t, reflect.ValueOf(ref).Elem().Interface()); err != nil || !bytes.Equal(out, want) {
			t.Fatalf("MarshalJSON after decoding %q:\n got %s\nwant %s", data, out, want)
		}
	})
}
