package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The demo says the page needs relay.wasm only when nothing serves one: not
// for a bundled app that carries its own (make demo-app serves demo/app's
// build with -module ""), and not when the module directory has it.
func TestModuleHint(t *testing.T) {
	write := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	page, app, module, empty := filepath.Join(root, "page"), filepath.Join(root, "app"), filepath.Join(root, "module"), filepath.Join(root, "empty")
	write(filepath.Join(page, "index.html"))
	write(filepath.Join(app, "index.html"))
	write(filepath.Join(app, "assets", "relay-0a1b2c.wasm"))
	write(filepath.Join(module, "relay.wasm"))
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		web, module, want string // want: a word of the hint, or "" for none
	}{
		{page, "", "no module directory"},
		{page, empty, "no relay.wasm in"},
		{page, module, ""},
		{app, "", ""},
		{app, empty, ""},
	} {
		got := moduleHint(c.web, c.module)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("moduleHint(%s, %q) = %q, want one with %q", filepath.Base(c.web), c.module, got, c.want)
		}
	}
}
