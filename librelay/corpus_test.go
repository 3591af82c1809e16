package librelay

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readFrameSeeds are the hand-written part of FuzzReadFrame's corpus: every
// shape of line the Reader and ParseFrame treat specially.
var readFrameSeeds = []string{
	`{"type":"a"}`,
	"{\"type\":\"a\",\"id\":\"1\"}\r\n\r\n\n{\"type\":\"b\",\"re\":\"1\"}\n",
	"{\"type\":\n\"x\"}\n{\"type\":\"ok\"}\n",
	"garbage\n{\"type\":\"ok\"}",
	`{"TYPE":"a","Instance":"i","SESSION":"s","Id":"1","SEQ":5,"Trace":"t","PAYLOAD":{}}`,
	`{"type":"a","inſtance":"long s","ſeſſion":"s"}`,
	`{"\u0074ype":"escaped key","p\u0061yload":[1]}`,
	`{"type":"a","type":null}`, `{"type":null}`, `null`, ` null `, `[]`, `"x"`, `1`, `{}`,
	`{"type":"a","payload":null}`, `{"type":"a","payload":"x","payload":{"y":[]}}`,
	`{"type":"a","seq":0}`, `{"type":"a","seq":18446744073709551615}`, `{"type":"a","seq":18446744073709551616}`,
	`{"type":"a","seq":-0}`, `{"type":"a","seq":1e3}`, `{"type":"a","seq":1.0}`, `{"type":"a","seq":"1"}`, `{"type":"a","seq":null}`,
	`{"type":"\u00e9\ud83d\ude00","id":"\ud800","re":""}`, `{"type":"a","instance":"\udc00\ud800\udc00"}`,
	"{\"type\":\"raw\xffbad\"}", "{\"type\":\"a\",\"trace\":\"\xff\"}", "{\"type\":\"a\",\"payload\":\"\xff\"}",
	`{"type":"a","instance":"\u0000"}`, `{"type":"a","instance":"\u007f"}`, `{"type":"a","instance":"\u0085"}`,
	`{"type":"a","instance":"\u2028"}`, `{"type":"<>&","payload":"<>&\u2028"}`,
	`{"type":"a","unknown":{"deep":[[[{"x":null}]]]},"more":[true,false,-1.5e-3]}`,
	`{"type":"a","unknown":[1,2,]}`, `{"type":"a",}`, `{"type":"a"`, `{"type":"a"}}`, `{"type" "a"}`,
	`{"type":"a","payload":01}`, `{"type":"a","payload":tru}`, `{"type":"a","payload":"\x"}`,
	"{\"type\":\"a\",\"payload\":\"tab\tinside\"}", `{"type":"a","id":"1","re":"2"}`, `{"type":"a","session":"s"}`,
	`{"type":"a","trace":"has space"}`, `{"type":5}`, `{"type":["a"]}`, `{"type":{}}`, `{"type":true}`,
	"\t {\"type\" : \"spaced\" , \"payload\" : { \"a\" : [ 1 , 2 ] } } \r\n",
	`{"type":"acp.message","instance":"i","session":"s","seq":3,"payload":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}}}}`,
}

// validateSeeds cover each rule of Validate once.
var validateSeeds = []Frame{
	{Type: "acp.message", Instance: "inst", Session: "sess", ID: "id", Seq: 7, Trace: "tr-x", Payload: []byte(`{"a":1}`)},
	{}, {Type: strings.Repeat("t", MaxTypeBytes+1)}, {Type: "x", Instance: strings.Repeat("i", MaxIDBytes+1)},
	{Type: "x\x7f"}, {Type: "x", Instance: "\u0085"}, {Type: "x", Instance: "\xff"}, {Type: "x", ID: "a", ReplyTo: "b"},
	{Type: "x", Session: "s"}, {Type: "x", Trace: strings.Repeat("a", MaxTraceBytes+1)}, {Type: "x", Trace: "a b"},
	{Type: "x", Payload: []byte("{\n\"a\" : 1 }")}, {Type: "x", Payload: []byte(`{"a":`)}, {Type: "x", Payload: []byte(" ")},
	{Type: "x", Instance: `"\` + "\u2028<>&", Payload: []byte(`"\u2028"`)},
}

// TestWriteSeedCorpus regenerates testdata/fuzz from the lists above when
// LIBRELAY_WRITE_CORPUS is set; files the fuzzer itself added are kept.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("LIBRELAY_WRITE_CORPUS") == "" {
		t.Skip("set LIBRELAY_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	for _, s := range readFrameSeeds {
		writeSeed(t, "FuzzReadFrame", "[]byte("+strconv.Quote(s)+")")
	}
	for _, fr := range wireFrames() {
		line, _ := AppendFrame(nil, &fr)
		writeSeed(t, "FuzzReadFrame", "[]byte("+strconv.Quote(string(line)+"\n")+")")
	}
	for _, f := range validateSeeds {
		writeSeed(t, "FuzzValidate", strings.Join([]string{
			"string(" + strconv.Quote(f.Type) + ")", "string(" + strconv.Quote(f.Instance) + ")",
			"string(" + strconv.Quote(f.Session) + ")", "string(" + strconv.Quote(f.ID) + ")",
			"string(" + strconv.Quote(f.ReplyTo) + ")", "uint64(" + strconv.FormatUint(f.Seq, 10) + ")",
			"string(" + strconv.Quote(f.Trace) + ")", "[]byte(" + strconv.Quote(string(f.Payload)) + ")",
		}, "\n"))
	}
	for i, in := range controlInputs {
		writeSeed(t, "FuzzControlJSON", "byte("+strconv.Itoa(i%len(controlPairs))+")\n[]byte("+strconv.Quote(in)+")")
	}
}

func writeSeed(t *testing.T, target, body string) {
	text := "go test fuzz v1\n" + body + "\n"
	sum := sha256.Sum256([]byte(text))
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "seed-"+hex.EncodeToString(sum[:8]))
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
