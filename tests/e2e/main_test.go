package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/jsbridge/bundle"
	relayjs "github.com/relaywasm/relaywasm/jsbridge/relayjs"
	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// repoRoot is the module's root, relative to this package.
const repoRoot = "../.."

// webDir is the page under test.
var webDir = filepath.Join(repoRoot, "demo", "web")

// moduleDir holds relay.wasm, relay.js and wasm_exec.js, set by TestMain.
var moduleDir string

// TestMain gives Chromium, chromedp and the module build a temporary folder
// of their own (they leave things in $TMPDIR) and makes sure an up-to-date
// module exists before any test starts a browser.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "relaywasm-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	os.Setenv("TMPDIR", tmp)
	moduleDir, err = findModule(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: no relay.wasm to test with:", err)
		return 1
	}
	if engine == webdriver.WebKit || engine == webdriver.WPE {
		if webDir, err = pageWithRecorder(webDir, tmp); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: giving the page its recorder:", err)
			return 1
		}
	}
	// Shown with -v or on failure: which module the page ran.
	fmt.Fprintln(os.Stderr, "e2e: relay.wasm, relay.js and wasm_exec.js from", moduleDir)
	defer closeShared()
	return m.Run()
}

// findModule returns dist/ when it holds a module built from the current
// sources, and otherwise builds one into tmp. RELAYWASM_MODULE_DIR overrides
// both, for testing a module built elsewhere.
func findModule(tmp string) (string, error) {
	if dir := os.Getenv("RELAYWASM_MODULE_DIR"); dir != "" {
		return dir, nil
	}
	goroot, err := goEnv("GOROOT")
	if err != nil {
		return "", err
	}
	wasmExec := filepath.Join(goroot, "lib", "wasm", "wasm_exec.js")
	dist := filepath.Join(repoRoot, "dist")
	if fresh, _ := distIsFresh(dist, wasmExec); fresh {
		return dist, nil
	}
	out := filepath.Join(tmp, "module")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(out, "relay.wasm"), "./wasm")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if msg, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building relay.wasm: %v\n%s", err, msg)
	}
	if err := bundle.Write(out); err != nil {
		return "", err
	}
	return out, copyFile(wasmExec, filepath.Join(out, "wasm_exec.js"))
}

// distIsFresh reports whether dist/ holds, byte for byte, what `make wasm`
// would write from the current sources (relay.js, worker.js and preload.js
// bundled, their declarations, and wasmExec) and a relay.wasm newer than
// every Go file the module is built from.
func distIsFresh(dist, wasmExec string) (bool, error) {
	b, err := os.ReadFile(wasmExec)
	if err != nil {
		return false, err
	}
	want := map[string][]byte{"wasm_exec.js": b}
	for _, name := range relayjs.Shipped() {
		if want[name], err = bundle.File(name); err != nil {
			return false, err
		}
	}
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil || !bytes.Equal(got, w) {
			return false, err
		}
	}
	st, err := os.Stat(filepath.Join(dist, "relay.wasm"))
	if err != nil {
		return false, err
	}
	newest, err := newestSource()
	if err != nil {
		return false, err
	}
	return st.ModTime().After(newest), nil
}

// newestSource is the latest modification time among the module's go.mod,
// go.sum and the Go files of every package relay.wasm is built from.
func newestSource() (time.Time, error) {
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./wasm")
	list.Dir = repoRoot
	list.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := list.Output()
	if err != nil {
		return time.Time{}, err
	}
	var newest time.Time
	note := func(path string) {
		if st, err := os.Stat(path); err == nil && st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	note(filepath.Join(repoRoot, "go.mod"))
	note(filepath.Join(repoRoot, "go.sum"))
	for _, dir := range strings.Fields(string(out)) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return time.Time{}, err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				note(filepath.Join(dir, e.Name()))
			}
		}
	}
	return newest, nil
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, fs.FileMode(0o644))
}
