// Package npm checks the npm package the way a web app takes it: the packed
// tarball (make npm) holds exactly the files meant, installs into a project
// of its own, resolves as "relaywasm" for Node's ESM resolver (the one
// bundlers follow) and gives tsc the real types, and its README's examples
// type-check against them.
//
// It needs node and npm (make test installs them) and the tarball that
// `make npm` writes to dist/; `make test` builds it first.
package npm

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

const repoRoot = "../.."

// manifest is the part of jsbridge/relayjs/package.json the tests read.
type manifest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "jsbridge", "relayjs", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	return m
}

// tarball is the package `make npm` packed for the current version.
func tarball(t *testing.T) string {
	t.Helper()
	m := readManifest(t)
	p, err := filepath.Abs(filepath.Join(repoRoot, "dist", m.Name+"-"+m.Version+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no packed tarball (%v): run `make npm` first", err)
	}
	return p
}

// meant is the package's file list, derived rather than kept by hand: the
// files jsbridge/relayjs ships (relayjs.Shipped: relay.js, worker.js and
// preload.js, each bundled, and their declarations), the wasm_exec.js of
// the Go that built the module, relay.wasm, the manifest and the package's
// README (jsbridge/relayjs/README.md, what npm shows of it).
func meant() []string {
	files := append([]string{"package.json", "README.md", "relay.wasm", "wasm_exec.js"}, relayjs.Shipped()...)
	slices.Sort(files)
	return files
}

// The tarball holds exactly the files meant, and npm pack --dry-run of the
// staged package lists the same.
func TestPackageHoldsExactlyTheFilesMeant(t *testing.T) {
	want := meant()
	got := slices.Sorted(maps.Keys(unpacked(t, tarball(t))))
	if !slices.Equal(got, want) {
		t.Errorf("tarball holds %q, want %q", got, want)
	}
	out, err := exec.Command("npm", "pack", "--dry-run", "--json", filepath.Join(repoRoot, "dist", "npm")).Output()
	if err != nil {
		t.Fatalf("npm pack --dry-run: %v", stderrOf(err))
	}
	var packs []struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal(out, &packs); err != nil || len(packs) != 1 {
		t.Fatalf("npm pack --dry-run --json: %v (%d packages)", err, len(packs))
	}
	var listed []string
	for _, f := range packs[0].Files {
		listed = append(listed, f.Path)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Errorf("npm pack --dry-run lists %q, want %q", listed, want)
	}
}

// unpacked is the tarball at path as its files' contents by name (the
// "package/" prefix npm gives every entry taken off).
func unpacked(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := make(map[string]string)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(h.Name, "package/")] = string(b)
	}
}

// Every import() the package makes at run time with a computed URL
// (wasm_exec.js, loaded by relay.js and worker.js) tells bundlers to leave
// it to the browser. Without webpackIgnore, webpack 5 bundles the call as a
// lookup in a map of its own modules, and loadRelay fails at run time with
// "Cannot find module" for the very file webpack emitted (checked by hand:
// webpack 5.113, both modes, fails without the comment and chats with it);
// @vite-ignore silences Vite's warning about the same call. webpack is not
// one of this project's npm dependencies, so this reads the shipped files.
func TestComputedImportsAreLeftToTheBrowser(t *testing.T) {
	call := regexp.MustCompile(`\bimport\(\s*([^)]{0,80})`)
	files := unpacked(t, tarball(t))
	for _, name := range []string{"relay.js", "worker.js"} {
		found := 0
		for i, line := range strings.Split(files[name], "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "//") || strings.HasPrefix(l, "*") {
				continue
			}
			for _, m := range call.FindAllStringSubmatchIndex(line, -1) {
				arg := line[m[2]:m[3]]
				if strings.HasPrefix(arg, `"`) || strings.HasPrefix(arg, "'") {
					continue // a literal: the bundler's to resolve
				}
				if strings.HasSuffix(line[:m[0]], "`") {
					continue // the text of a script made at run time (remote.js's blob: worker): no bundler sees it
				}
				found++
				if !strings.Contains(arg, "webpackIgnore: true") || !strings.Contains(arg, "@vite-ignore") {
					t.Errorf("%s:%d: import(%s…) is computed and not marked webpackIgnore and @vite-ignore", name, i+1, arg)
				}
			}
		}
		if found == 0 {
			t.Errorf("%s: no computed import() found: the check no longer sees wasm_exec.js's", name)
		}
	}
}

// Installed into a project of its own as a user would (npm install of the
// tarball), "relaywasm" and the files a bundler may leave to be copied
// (relay.wasm, wasm_exec.js, worker.js) resolve to the installed files, and
// tsc type-checks a consumer against the package's declarations, and with
// it each TypeScript example of the package's README as installed, so the
// README cannot drift from the API. They are checked twice: as a bundler's
// project resolves modules (moduleResolution bundler, as Vite's templates
// have it) and as Node's ESM does (NodeNext, which reads only the exports
// map's types and takes no import without its extension). One tsc run
// builds both projects (-b; some 3.5 s to start and check, the second
// project 0.8 s more); --listFiles shows that each file was in it, and the
// @ts-expect-error lines in them, misuses of the API, would fail it if the
// types were not the real ones.
func TestTarballInstallsResolvesAndTypes(t *testing.T) {
	dir := consumer(t)

	// After the specifiers resolve, both entries are imported, as a server
	// rendering the app's pages or a test runner in Node imports them: node
	// must exit when its script ends, so they leave nothing running
	// (relay.js made its MessageChannel as it loaded, and node never exited).
	out := runWithin(t, time.Minute, dir, "node", "--input-type=module", "-e",
		`for (const s of ["relaywasm", "relaywasm/preload", "relaywasm/relay.wasm", "relaywasm/wasm_exec.js", "relaywasm/worker.js"]) console.log(import.meta.resolve(s));
const m = await import("relaywasm");
await import("relaywasm/preload");
console.log(Object.keys(m).sort().join(","));`)
	lines := strings.Fields(out)
	if exports := lines[len(lines)-1]; exports != "RelayError,loadRelay" {
		t.Errorf("relaywasm imported in Node exports %s, want RelayError,loadRelay", exports)
	}
	for i, want := range []string{"relay.js", "preload.js", "relay.wasm", "wasm_exec.js", "worker.js"} {
		p := filepath.Join(dir, "node_modules", "relaywasm", want)
		if i >= len(lines) || lines[i] != "file://"+p {
			t.Errorf("resolved %q, want file://%s", lines, p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}

	files := append([]string{"consumer.ts"}, readmeExamples(t, dir)...)
	projects := map[string]map[string]any{
		"tsconfig.bundler.json": {"extends": "./tsconfig.json", "files": files},
		"tsconfig.nodenext.json": {"extends": "./tsconfig.json", "files": files,
			"compilerOptions": map[string]string{"module": "NodeNext", "moduleResolution": "NodeNext"}},
	}
	for name, p := range projects {
		config, _ := json.Marshal(p)
		if err := os.WriteFile(filepath.Join(dir, name), config, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	listed := strings.Fields(run(t, dir, tsc(dir), "-b", "--listFiles", "tsconfig.bundler.json", "tsconfig.nodenext.json"))
	for _, f := range files {
		if n := count(listed, filepath.Join(dir, f)); n != len(projects) {
			t.Errorf("tsc checked %s in %d projects, want %d; it listed:\n%s", f, n, len(projects), strings.Join(listed, "\n"))
		}
	}
}

func count(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}

// readmeExamples writes each ts block of the package README as installed
// to a file of the consumer project in dir, readme-1.ts and on, and returns
// their names. The first gets a misuse of loadRelay's options under
// @ts-expect-error, which fails the check unless the examples are checked
// against the real types.
func readmeExamples(t *testing.T, dir string) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(dir, "node_modules", "relaywasm", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := codeBlocks(string(readme), "ts")
	if len(blocks) == 0 {
		t.Fatal("the package README has no ts example to check")
	}
	blocks[0] += "\n// @ts-expect-error: worker is a boolean\nawait loadRelay({ worker: \"yes\" });\n"
	var files []string
	for i, b := range blocks {
		name := "readme-" + strconv.Itoa(i+1) + ".ts"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	return files
}

// tsc is the consumer project's TypeScript compiler.
func tsc(dir string) string { return filepath.Join(dir, "node_modules", ".bin", "tsc") }

// consumer is a scratch project (testdata/consumer: typescript from its
// lockfile) with the tarball installed as a user would install it.
func consumer(t *testing.T) string {
	t.Helper()
	tgz := tarball(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/consumer")); err != nil {
		t.Fatal(err)
	}
	npm(t, dir, "ci", "--no-audit", "--no-fund")
	npm(t, dir, "install", "--no-save", "--no-audit", "--no-fund", tgz)
	return dir
}

// codeBlocks returns the bodies of markdown's fenced code blocks of lang.
func codeBlocks(md, lang string) []string {
	var blocks []string
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		switch fence := strings.TrimSpace(line); {
		case !in && fence == "```"+lang:
			in = true
			b.Reset()
		case in && fence == "```":
			in = false
			blocks = append(blocks, b.String())
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}

func npm(t *testing.T, dir string, args ...string) {
	t.Helper()
	run(t, dir, "npm", args...)
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	return runWithin(t, 5*time.Minute, dir, name, args...)
}

// runWithin runs name in dir and returns what it printed; it fails the test
// if the command fails or has not exited within limit.
func runWithin(t *testing.T, limit time.Duration, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after %v\n%s", name, strings.Join(args, " "), limit, out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), stderrOf(err), out)
	}
	return string(out)
}

func stderrOf(err error) error {
	if ee, ok := errors.AsType[*exec.ExitError](err); ok && len(ee.Stderr) > 0 {
		return errors.New(strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
