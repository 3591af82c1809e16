package librelay

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// lightProgram uses exactly what the browser module's hot path uses. It must
// link neither encoding/json's encoder nor its decoder, nor fmt: that is the
// size budget the hand-written codec exists for.
const lightProgram = `package main

import (
	"crypto/ed25519"
	"os"

	"github.com/relaywasm/relaywasm/librelay"
)

func main() {
	f, err := librelay.ParseFrame([]byte(os.Args[0]))
	if err != nil {
		os.Exit(1)
	}
	line, _ := librelay.AppendFrame(nil, &f)
	hello, _ := librelay.Hello{Instance: f.Instance, Nonce: line}.MarshalJSON()
	var w librelay.Welcome
	_ = w.UnmarshalJSON(f.Payload)
	err = librelay.VerifyWelcome(ed25519.PublicKey(line), hello, w.ProtocolVersion, f.Instance, w.Signature)
	os.Stdout.Write(append(line, hello...))
	if err != nil {
		os.Exit(2)
	}
}
`

// forbiddenSymbols are symbol-name fragments of encoding/json's reflection
// codec and of fmt, spelled as go tool nm prints them; the wasm name section
// spells them with '/' and '(*T)' mangled, which wasmSymbolName undoes.
var forbiddenSymbols = []string{
	"encoding/json.(*decodeState)",
	"encoding/json.(*encodeState)",
	"encoding/json.Unmarshal",
	"encoding/json.Marshal",
	"encoding/json.newTypeEncoder",
	"encoding/json.typeFields",
	"fmt.",
}

func buildLightProgram(t *testing.T, goos, goarch string) string {
	t.Helper()
	return buildProgram(t, lightProgram, goos, goarch)
}

func buildProgram(t *testing.T, program, goos, goarch string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a program; skipped with -short")
	}
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("cannot run the go command from inside wasm")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "light-"+goos+"-"+goarch)
	cmd := exec.Command(goTool(t), "build", "-o", out, src)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=", "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s/%s: %v\n%s", goos, goarch, err, msg)
	}
	return out
}

func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no go command available")
	}
	return p
}

// forbiddenIn returns the names that match forbiddenSymbols.
func forbiddenIn(names []string) []string {
	var found []string
	for _, name := range names {
		for _, bad := range forbiddenSymbols {
			if strings.Contains(name, bad) {
				found = append(found, name)
			}
		}
	}
	return found
}

func checkSymbols(t *testing.T, names []string, what string) {
	t.Helper()
	if len(names) < 100 {
		t.Fatalf("%s: only %d symbols read; the check would prove nothing", what, len(names))
	}
	for _, name := range forbiddenIn(names) {
		t.Errorf("%s links %s", what, name)
	}
}

// TestLightProgramNative inspects a native build with go tool nm, which
// cannot read wasm; dead-code elimination is the same linker logic.
func TestLightProgramNative(t *testing.T) {
	bin := buildLightProgram(t, runtime.GOOS, runtime.GOARCH)
	out, err := exec.Command(goTool(t), "tool", "nm", "-size", "-sort", "size", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			names = append(names, strings.Join(f[3:], " "))
		}
	}
	checkSymbols(t, names, "native light program")
}

// TestLightProgramWasm inspects the GOOS=js GOARCH=wasm build itself, through
// the function names the Go linker writes into the module's name section.
func TestLightProgramWasm(t *testing.T) {
	checkSymbols(t, wasmSymbols(t, buildLightProgram(t, "js", "wasm")), "wasm light program")
}

// wasmSymbols reads a wasm module's function names, spelled as go tool nm
// would spell them.
func wasmSymbols(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names, err := wasmFunctionNames(data)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = wasmSymbolName(n)
	}
	return names
}

// TestWasmSymbolCheckDetects is the control: a program that does call
// encoding/json and fmt must be caught by the same reading of the module.
func TestWasmSymbolCheckDetects(t *testing.T) {
	heavy := strings.Replace(lightProgram, "os.Stdout.Write(append(line, hello...))",
		"var v any\n\t_ = json.Unmarshal(line, &v)\n\tb, _ := json.Marshal(v)\n\tfmt.Println(b)", 1)
	heavy = strings.Replace(heavy, `"os"`, "\"encoding/json\"\n\t\"fmt\"\n\t\"os\"", 1)
	found := strings.Join(forbiddenIn(wasmSymbols(t, buildProgram(t, heavy, "js", "wasm"))), " ")
	for _, want := range []string{"encoding/json.(*decodeState)", "encoding/json.(*encodeState)", "fmt."} {
		if !strings.Contains(found, want) {
			t.Errorf("a program using encoding/json and fmt was not caught linking %s", want)
		}
	}
}

// wasmSymbolName undoes the Go linker's wasm name mangling for the pieces
// forbiddenSymbols use: "encoding_json.__decodeState_.x" is
// "encoding/json.(*decodeState).x".
func wasmSymbolName(s string) string {
	s = strings.ReplaceAll(s, "encoding_json.", "encoding/json.")
	if i := strings.Index(s, ".__"); i >= 0 {
		if j := strings.Index(s[i+3:], "_."); j >= 0 {
			s = s[:i] + ".(*" + s[i+3:i+3+j] + ")" + s[i+3+j+1:]
		}
	}
	return s
}

// wasmFunctionNames reads the function-name subsection of a wasm module's
// "name" custom section.
func wasmFunctionNames(b []byte) ([]string, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, errors.New("not a wasm module")
	}
	for r := (wasmReader{b: b[8:]}); len(r.b) > 0; {
		id := r.byte()
		section := wasmReader{b: r.bytes()}
		if id == 0 && string(section.bytes()) == "name" {
			return section.functionNames(), section.err
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	return nil, errors.New("no name section")
}

type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) uleb() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<31 {
		r.err, r.b = errors.New("bad LEB128"), nil
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *wasmReader) byte() byte {
	if len(r.b) == 0 {
		r.err = errors.New("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *wasmReader) bytes() []byte {
	n := r.uleb()
	if n > len(r.b) {
		r.err, r.b = errors.New("truncated"), nil
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *wasmReader) functionNames() []string {
	for len(r.b) > 0 && r.err == nil {
		id := r.byte()
		sub := wasmReader{b: r.bytes()}
		if id != 1 {
			continue
		}
		var names []string
		for n := sub.uleb(); n > 0 && sub.err == nil; n-- {
			sub.uleb() // function index
			names = append(names, string(sub.bytes()))
		}
		r.err = sub.err
		return names
	}
	return nil
}
