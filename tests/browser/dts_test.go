//go:build js && wasm

package browser

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
	"github.com/relaywasm/relaywasm/wasm/client"
)

// relay.d.ts promises that every error code the page can see is in its
// ErrorCode union, and nothing else. The codes are defined once, in Go: the
// engine's table (client.Codes: its errors, the reasons the relay's close
// codes name, and the codes of a context's end or anything else) and the
// codes only relay.js raises (boundary.LoaderCodes). The union is read out
// of relay.d.ts and compared both ways, so a new code cannot be forgotten
// and a removed one cannot linger.
func TestDeclarationsListEveryCode(t *testing.T) {
	// att.stream() errors its readable with the eviction's reason as the code.
	want := append(append(client.Codes(), boundary.LoaderCodes...), client.EvictionReasons()...)
	compareUnion(t, "ErrorCode", want)
	compareUnion(t, "EvictionReason", client.EvictionReasons())
	compareUnion(t, "StorageFallbackReason", boundary.FallbackReasons)
}

func compareUnion(t *testing.T, name string, want []string) {
	t.Helper()
	got := union(t, name)
	for _, c := range want {
		if !slices.Contains(got, c) {
			t.Errorf("relay.d.ts's %s does not list %q", name, c)
		}
	}
	for _, c := range got {
		if !slices.Contains(want, c) {
			t.Errorf("relay.d.ts's %s lists %q, which Go does not define", name, c)
		}
	}
}

// union reads the string literals of `export type name = "a" | "b" …;` in
// relay.d.ts, comments left out.
func union(t *testing.T, name string) []string {
	t.Helper()
	start := strings.Index(relayjs.RelayDTS, "export type "+name+" =")
	if start < 0 {
		t.Fatalf("relay.d.ts declares no type %s", name)
	}
	decl := lineComment.ReplaceAllString(relayjs.RelayDTS[start:], "")
	decl = decl[:strings.Index(decl, ";")+1]
	var out []string
	for _, m := range literal.FindAllStringSubmatch(decl, -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("relay.d.ts's %s has no members", name)
	}
	return out
}

var (
	lineComment = regexp.MustCompile(`//[^\n]*`)
	literal     = regexp.MustCompile(`"([a-z_]+)"`)
)

// boundary.js is generated from jsbridge/boundary; what is committed must be
// what the generator writes today (run `go generate ./jsbridge/relayjs`).
func TestBoundaryJSIsGenerated(t *testing.T) {
	if relayjs.BoundaryJS != boundary.JS() {
		t.Fatal("jsbridge/relayjs/boundary.js is not what jsbridge/boundary generates: run go generate ./jsbridge/relayjs")
	}
}

// Every file relayjs ships is embedded, and every module in the folder is
// one it ships.
func TestShippedFiles(t *testing.T) {
	entries, err := relayjs.Files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	slices.Sort(have)
	names := slices.Sorted(slices.Values(relayjs.Names))
	if !slices.Equal(have, names) {
		t.Fatalf("relayjs embeds %v, ships %v", have, names)
	}
}
