// Package bundle makes the JavaScript that ships: each entry module of
// jsbridge/relayjs (relay.js, worker.js, preload.js) as one file holding it
// and every module it imports. `make wasm` writes them with its command:
//
//	go run ./jsbridge/bundle/cmd/bundle -o dist
//
// The sources stay one module per concern (relay.js says which) and are
// what tests/browser loads; a page gets one file per entry because a module
// graph costs a reload what it is deep: relay.js imports bridge.js, which
// imports sockets.js, which imports records.js, and the browser learns of
// each level only once the one above has arrived and been parsed. With
// relay.wasm compiling at the same time on a 2-core machine, relay.js's 16
// modules took 60 ms from the page's import to relay.js running; the one
// file takes 15–25 (tests/bench, `-only reload`, with marks put in by hand).
//
// It is a bundler for these modules only, not for JavaScript at large: it
// accepts the subset they are written in and refuses anything else, so a
// module that strays from it fails the build instead of shipping wrong.
//
//   - imports are named and relative: import { a, b as c } from "./x.js";
//     (a dynamic import() is left alone: it loads a file beside the bundle);
//   - exports are declarations (export function|async function|class|
//     const|let NAME) or, in an entry, export { a, b };
//   - top-level declarations start at the beginning of a line.
//
// Every imported module becomes a function scope run once, in the order ES
// modules run (depth first, in import order, each before its importer), that
// returns its exports; its importers destructure them. No export is a let
// that changes after the module ran, so a copy is the binding (Bundle
// refuses an exported let that is assigned again). The entry's own code
// stays at the top level, its exports as they are.
package bundle

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
)

// Write writes what jsbridge/relayjs ships into dir (made if missing):
// each entry bundled, and the TypeScript declarations as they are.
func Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range relayjs.Shipped() {
		b, err := File(name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// File is the shipped file name (one of relayjs.Shipped) as it ships.
func File(name string) ([]byte, error) {
	if slices.Contains(relayjs.Entries, name) {
		return Bundle(relayjs.Files, name)
	}
	return fs.ReadFile(relayjs.Files, name)
}

var (
	// importDecl is a named import of a module of the folder, at the start
	// of a line; its names may span lines.
	importDecl = regexp.MustCompile(`(?m)^import\s*\{([^}]*)\}\s*from\s*"\./([a-z_]+\.js)";[ \t]*\n`)
	// anyImport is any static import at the start of a line.
	anyImport = regexp.MustCompile(`(?m)^import\b`)
	// exportDecl is an exported declaration; the name is group 2.
	exportDecl = regexp.MustCompile(`(?m)^export ((?:async )?function\*? |class |const |let )([A-Za-z_$][\w$]*)`)
	// exportList is an entry's export { a, b };
	exportList = regexp.MustCompile(`(?m)^export\s*\{([^}]*)\}[ \t]*;?[ \t]*$`)
	anyExport  = regexp.MustCompile(`(?m)^export\b`)
)

// module is one source file, parsed as far as bundling needs.
type module struct {
	name    string
	body    string // the source without its imports, as an entry runs it
	inner   string // body without its export { … } lists, as an imported module runs it
	imports []binding
	exports []string // names declared with export or listed in export { … }
}

// binding is one import statement: names imported from the module from.
type binding struct {
	from  string
	names [][2]string // {exported, local}
}

// Bundle returns the entry module of files with every module it imports,
// as one ES module.
func Bundle(files fs.FS, entry string) ([]byte, error) {
	order, mods, err := load(files, entry)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s: bundled by jsbridge/bundle from jsbridge/relayjs (%s); edit those, not this.\n", entry, strings.Join(order, ", "))
	for _, name := range order {
		m := mods[name]
		if name == entry {
			b.WriteString("\n// " + name + "\n")
			writeImports(&b, m)
			b.WriteString(m.body)
			continue
		}
		fmt.Fprintf(&b, "\n// %s\nconst %s = (() => {\n", name, scope(name))
		writeImports(&b, m)
		b.WriteString(m.inner)
		fmt.Fprintf(&b, "return { %s };\n})();\n", strings.Join(m.exports, ", "))
	}
	return b.Bytes(), nil
}

// load parses entry and the modules it imports, and returns them in the
// order they run.
func load(files fs.FS, entry string) ([]string, map[string]*module, error) {
	mods := map[string]*module{}
	var order []string
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		if slices.Contains(path, name) {
			return fmt.Errorf("import cycle: %s", strings.Join(append(path, name), " → "))
		}
		if _, done := mods[name]; done {
			return nil
		}
		m, err := parse(files, name)
		if err != nil {
			return err
		}
		mods[name] = m
		for _, imp := range m.imports {
			if err := visit(imp.from, append(path, name)); err != nil {
				return err
			}
		}
		order = append(order, name)
		return nil
	}
	if err := visit(entry, nil); err != nil {
		return nil, nil, err
	}
	for _, m := range mods {
		if err := checkImports(m, mods); err != nil {
			return nil, nil, err
		}
	}
	return order, mods, nil
}

func parse(files fs.FS, name string) (*module, error) {
	src, err := fs.ReadFile(files, name)
	if err != nil {
		return nil, err
	}
	s := string(src)
	if strings.Contains(s, "$bundled_") {
		return nil, fmt.Errorf("%s: uses the prefix $bundled_, which the bundle's scopes are named with", name)
	}
	m := &module{name: name}
	for _, g := range importDecl.FindAllStringSubmatch(s, -1) {
		names, err := importNames(g[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m.imports = append(m.imports, binding{from: g[2], names: names})
	}
	s = importDecl.ReplaceAllString(s, "")
	if anyImport.MatchString(s) {
		return nil, fmt.Errorf("%s: an import that is not import { … } from \"./x.js\"; at %q", name, lineAt(s, anyImport))
	}
	m.body = s
	for _, g := range exportDecl.FindAllStringSubmatch(s, -1) {
		m.exports = append(m.exports, g[2])
		if g[1] == "let " && reassigned(g[2]).MatchString(s) {
			return nil, fmt.Errorf("%s: the exported let %s is assigned again; its importers would keep the first value", name, g[2])
		}
	}
	s = exportDecl.ReplaceAllString(s, "$1$2")
	for _, g := range exportList.FindAllStringSubmatch(s, -1) {
		for _, n := range strings.Split(g[1], ",") {
			if n = strings.TrimSpace(n); n != "" {
				if strings.Contains(n, " as ") {
					return nil, fmt.Errorf("%s: export { %s }: a renamed export is not taken", name, n)
				}
				m.exports = append(m.exports, n)
			}
		}
	}
	m.inner = exportList.ReplaceAllString(s, "")
	if anyExport.MatchString(m.inner) {
		return nil, fmt.Errorf("%s: an export the bundler does not take, at %q", name, lineAt(m.inner, anyExport))
	}
	return m, nil
}

// reassigned matches a statement that assigns name again: name = …, an
// operator assignment, or name++ and the like, at the start of a line, as
// these modules write their statements.
func reassigned(name string) *regexp.Regexp {
	n := regexp.QuoteMeta(name)
	return regexp.MustCompile(`(?m)^\s*(?:` + n + `\s*(?:[-+*/%|&^]|\*\*|<<|>>>?|&&|\|\||\?\?)?=[^=]|(?:\+\+|--)` + n + `\b|` + n + `\s*(?:\+\+|--))`)
}

// importNames parses "a, b as c" into {exported, local} pairs.
func importNames(list string) ([][2]string, error) {
	var out [][2]string
	for _, n := range strings.Split(list, ",") {
		f := strings.Fields(n)
		switch {
		case len(f) == 0:
		case len(f) == 1:
			out = append(out, [2]string{f[0], f[0]})
		case len(f) == 3 && f[1] == "as":
			out = append(out, [2]string{f[0], f[2]})
		default:
			return nil, fmt.Errorf("cannot read the import %q", strings.TrimSpace(n))
		}
	}
	return out, nil
}

// checkImports says when m imports a name its module does not export.
func checkImports(m *module, mods map[string]*module) error {
	for _, imp := range m.imports {
		from := mods[imp.from]
		for _, n := range imp.names {
			if !slices.Contains(from.exports, n[0]) {
				return fmt.Errorf("%s imports %s from %s, which does not export it", m.name, n[0], imp.from)
			}
		}
	}
	return nil
}

// writeImports writes m's imports as destructurings of the scopes they come
// from, which have run by then.
func writeImports(b *bytes.Buffer, m *module) {
	for _, imp := range m.imports {
		parts := make([]string, len(imp.names))
		for i, n := range imp.names {
			parts[i] = n[0]
			if n[1] != n[0] {
				parts[i] = n[0] + ": " + n[1]
			}
		}
		fmt.Fprintf(b, "const { %s } = %s;\n", strings.Join(parts, ", "), scope(imp.from))
	}
}

// scope is the name of the constant that holds a bundled module's exports.
func scope(name string) string {
	return "$bundled_" + strings.TrimSuffix(name, ".js")
}

func lineAt(s string, re *regexp.Regexp) string {
	i := re.FindStringIndex(s)[0]
	line, _, _ := strings.Cut(s[i:], "\n")
	return line
}
