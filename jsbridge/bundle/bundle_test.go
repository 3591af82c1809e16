package bundle

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

// modules is a small graph in the subset the bundler takes: a diamond
// (entry imports a and b, both import c), a renamed import, an export list,
// side effects at the top of each module (the log says the order they ran
// in) and a name each module keeps to itself and declares alike (dup).
var modules = fstest.MapFS{
	"entry.js": {Data: []byte(`import { fromA } from "./a.js";
import { fromB as b, C } from "./b.js";

globalThis.log = [...(globalThis.log ?? []), "entry"];
const dup = "entry";
function answer() { return [fromA(), b(), C, dup].join(" "); }
export { answer };
export const ran = globalThis.log;
`)},
	"a.js": {Data: []byte(`import { c } from "./c.js";

globalThis.log = [...(globalThis.log ?? []), "a"];
const dup = "a";
export function fromA() { return c() + dup; }
`)},
	"b.js": {Data: []byte(`import {
  c,
  C,
} from "./c.js";

globalThis.log = [...(globalThis.log ?? []), "b"];
const dup = "b";
export async function* never() {}
export function fromB() { return c() + dup; }
export { C };
`)},
	"c.js": {Data: []byte(`globalThis.log = [...(globalThis.log ?? []), "c"];
let calls = 0;
export let unchanged = "an exported let never assigned again is taken";
export const C = "C";
export function c() { calls++; return "c" + calls; }
`)},
}

// run imports the module at path in node and prints what print(module)
// evaluates to. Node then exits: relay.js leaves a channel open that would
// keep it running.
func run(t *testing.T, path, print string) string {
	t.Helper()
	script := `const m = await import(` + jsString("file://"+path) + `); console.log(` + print + `); process.exit(0);`
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", "--input-type=module", "-e", script).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// The bundle runs as the modules do: in the same order, each once, with the
// same exports and the same results, although every module declares a dup
// of its own.
func TestBundleRunsAsTheModulesDo(t *testing.T) {
	dir := t.TempDir()
	for name, f := range modules {
		if err := os.WriteFile(filepath.Join(dir, name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Bundle(modules, "entry.js")
	if err != nil {
		t.Fatal(err)
	}
	bundled := filepath.Join(dir, "bundled.js")
	if err := os.WriteFile(bundled, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const print = `JSON.stringify([Object.keys(m).sort(), m.ran, m.answer()])`
	want := run(t, filepath.Join(dir, "entry.js"), print)
	if want != `[["answer","ran"],["c","a","b","entry"],"c1a c2b C entry"]` {
		t.Fatalf("the modules themselves gave %s: the test's graph is not what it says", want)
	}
	if got := run(t, bundled, print); got != want {
		t.Errorf("bundled: %s\nmodules: %s", got, want)
	}
}

// What ships exports what its source does.
func TestShippedEntriesExportWhatTheirSourcesDo(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	if err := os.CopyFS(src, relayjs.Files); err != nil {
		t.Fatal(err)
	}
	// worker.js waits for its page's messages and never ends in node.
	for _, entry := range []string{"relay.js", "preload.js"} {
		const print = `JSON.stringify(Object.keys(m).sort())`
		want, got := run(t, filepath.Join(src, entry), print), run(t, filepath.Join(dir, entry), print)
		if got != want {
			t.Errorf("%s exports %s bundled, %s as modules", entry, got, want)
		}
	}
	for _, entry := range relayjs.Entries {
		b, err := os.ReadFile(filepath.Join(dir, entry))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `from "./`) {
			t.Errorf("%s still imports a module beside it", entry)
		}
	}
}

// A module outside the subset fails the build, saying where.
func TestBundleRefusesWhatItCannotBundle(t *testing.T) {
	for _, c := range []struct{ name, entry, other, want string }{
		{"namespace import", `import * as a from "./a.js";`, `export const x = 1;`, "an import that is not"},
		{"default import", `import a from "./a.js";`, `export const x = 1;`, "an import that is not"},
		{"default export", `import { x } from "./a.js";`, `export default 1;`, "an export the bundler does not take"},
		{"re-export", `import { x } from "./a.js";`, `export { x } from "./b.js";`, "an export the bundler does not take"},
		{"renamed export", `import { x } from "./a.js";`, "const y = 1;\nexport { y as x };", "a renamed export"},
		{"missing name", `import { y } from "./a.js";`, `export const x = 1;`, "which does not export it"},
		{"missing module", `import { x } from "./b.js";`, `export const x = 1;`, "b.js"},
		{"cycle", `import { x } from "./a.js";`, `import { e } from "./entry.js";` + "\nexport const x = 1;", "import cycle"},
		{"reassigned let", `import { x } from "./a.js";`, "export let x = 1;\nx = 2;", "assigned again"},
		{"operator-assigned let", `import { x } from "./a.js";`, "export let x = 1;\nfunction f() {\n  x ??= 2;\n}", "assigned again"},
		{"incremented let", `import { x } from "./a.js";`, "export let x = 1;\nfunction f() {\n  x++;\n}", "assigned again"},
		{"scope name", `import { x } from "./a.js";`, "export const x = 1; const $bundled_a = 2;", "$bundled_"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := fstest.MapFS{
				"entry.js": {Data: []byte(c.entry + "\nexport const e = 1;\n")},
				"a.js":     {Data: []byte(c.other + "\n")},
			}
			_, err := Bundle(files, "entry.js")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}
