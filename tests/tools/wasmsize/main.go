// Command wasmsize shows what the code of a Go WebAssembly module is made of,
// by package and by function, because `go tool nm` does not read wasm files:
//
//	GOOS=js GOARCH=wasm go build -trimpath -o relay-names.wasm ./wasm
//	go run ./tests/tools/wasmsize [-top 25] [-funcs n] relay-names.wasm
//
// -funcs sets how many functions to list (default: as many as -top; 0 lists
// packages only, which is what `make size` prints).
//
// Build without -ldflags=-s: the function names come from the module's
// "name" section, which -s strips. Sizes are the bytes of each function body;
// the data section (strings, type data, the pclntab) is reported as a whole.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

func main() {
	top := flag.Int("top", 25, "how many packages and functions to list")
	funcs := flag.Int("funcs", -1, "how many functions to list (-1: as many as -top, 0: none)")
	flag.Parse()
	if *funcs < 0 {
		*funcs = *top
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: wasmsize [-top n] [-funcs n] module.wasm")
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err == nil {
		err = report(data, *top, *funcs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmsize:", err)
		os.Exit(1)
	}
}

type fn struct {
	name string
	size int
}

func report(data []byte, top, funcs int) error {
	m, err := parse(data)
	if err != nil {
		return err
	}
	if len(m.names) == 0 {
		return errors.New("no function names: build without -ldflags=-s")
	}
	fns := make([]fn, len(m.bodies))
	byPkg := map[string]int{}
	code := 0
	for i, size := range m.bodies {
		name := m.names[m.imported+i]
		fns[i] = fn{name, size}
		byPkg[pkg(name)] += size
		code += size
	}
	fmt.Printf("file %d bytes: code %d, data %d\n\n", len(data), code, m.data)
	pkgs := make([]fn, 0, len(byPkg))
	for p, size := range byPkg {
		pkgs = append(pkgs, fn{p, size})
	}
	list("package", pkgs, code, top)
	if funcs > 0 {
		fmt.Println()
		list("function", fns, code, funcs)
	}
	return nil
}

func list(what string, rows []fn, total, top int) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].size > rows[j].size })
	fmt.Printf("%9s %6s  %s\n", "bytes", "code%", what)
	for _, r := range rows[:min(top, len(rows))] {
		fmt.Printf("%9d %5.1f%%  %s\n", r.size, 100*float64(r.size)/float64(total), r.name)
	}
}

// pkg is the package of a function name as the Go linker spells it in wasm:
// the import path with '/' and '.' turned into '_' up to the first '.'
// that separates it from the function ("github.com_x_y.F", "runtime.f").
func pkg(name string) string {
	rest := name
	prefix := ""
	if strings.HasPrefix(rest, "github.com_") || strings.HasPrefix(rest, "golang.org_") {
		i := strings.IndexByte(rest, '_')
		prefix, rest = rest[:i+1], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		rest = rest[:i]
	}
	return prefix + rest
}

type module struct {
	imported int            // imported functions: they come first in the index space
	bodies   []int          // size of each defined function's body
	names    map[int]string // function index -> name
	data     int            // bytes of the data section
}

// parse reads the sections of a wasm module that say how big its code is.
func parse(b []byte) (module, error) {
	m := module{names: map[int]string{}}
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return m, errors.New("not a wasm module")
	}
	r := reader{b: b, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		size := r.uint()
		end := r.off + size
		if r.err != nil || end > len(r.b) {
			return m, errors.New("truncated section")
		}
		sec := reader{b: r.b[:end], off: r.off}
		switch id {
		case 2:
			m.imported = sec.imports()
		case 10:
			for n := sec.uint(); n > 0 && sec.err == nil; n-- {
				size := sec.uint()
				m.bodies = append(m.bodies, size)
				sec.off += size
			}
		case 11:
			m.data = size
		case 0:
			if sec.name() == "name" {
				sec.functionNames(m.names)
			}
		}
		if sec.err != nil {
			return m, sec.err
		}
		r.off = end
	}
	return m, r.err
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.err = errors.New("truncated module")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) uint() int {
	v, n := binary.Uvarint(r.b[min(r.off, len(r.b)):])
	if n <= 0 {
		r.err = errors.New("bad LEB128 number")
		return 0
	}
	r.off += n
	return int(v)
}

func (r *reader) name() string {
	n := r.uint()
	if r.err != nil || r.off+n > len(r.b) {
		r.err = errors.New("truncated name")
		return ""
	}
	r.off += n
	return string(r.b[r.off-n : r.off])
}

// imports counts the imported functions of the import section.
func (r *reader) imports() int {
	funcs := 0
	for n := r.uint(); n > 0 && r.err == nil; n-- {
		r.name()
		r.name()
		switch r.byte() {
		case 0: // function: type index
			r.uint()
			funcs++
		case 1: // table: element type, limits
			r.byte()
			r.limits()
		case 2: // memory: limits
			r.limits()
		case 3: // global: value type, mutability
			r.byte()
			r.byte()
		}
	}
	return funcs
}

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.uint()
	}
	r.uint()
}

// functionNames reads the function-names subsection (id 1) of "name".
func (r *reader) functionNames(names map[int]string) {
	for r.off < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.uint()
		end := r.off + size
		if id == 1 {
			for n := r.uint(); n > 0 && r.err == nil; n-- {
				i := r.uint()
				names[i] = r.name()
			}
		}
		r.off = end
	}
}
