package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// The app in Vite's dev server, as its developers first run it (`vite`, no
// build). The dev server's dependency optimizer bundles relaywasm into a
// cache of its own, away from relay.wasm, wasm_exec.js and worker.js, and
// must rewrite relay.js's new URL(…, import.meta.url) to where npm put
// them; worker.js is served as a module worker of its own. The app chats on
// the page's thread and in the worker, each fetching relay.wasm once.
// Chromium only: what is under test is the dev server's rewriting, the
// same for every engine, and the built app runs in every engine
// (TestDemoAppChats).
func TestDemoAppInViteDevServer(t *testing.T) {
	engineRecorded()
	if engine != webdriver.Chromium {
		t.Skipf("%s: the dev server's rewriting is the same in every engine; Chromium checks it", engine)
	}
	t.Parallel()
	page := viteDevServer(t)
	s := startStack(t, 0)
	for _, c := range []struct{ mode, fragment string }{{"main", ""}, {"worker", "&worker=1"}} {
		t.Run(c.mode, func(t *testing.T) {
			tb := openTab(t, newBrowser(t), "app", page+"#relay="+url.QueryEscape(s.AttachURL())+c.fragment)
			appReady(tb)
			appCount(tb, c.mode, `/node_modules/relaywasm/relay\.wasm$`)
		})
	}
}

// viteLocal is the line in which vite says where it serves.
var viteLocal = regexp.MustCompile(`Local:\s+(http://127\.0\.0\.1:\d+/)`)

// viteDevServer starts `vite` in demo/app on a free loopback port and
// returns the app's URL. Its configuration, written for the test, says only
// where to listen and to keep the optimizer's cache in the test's own
// folder (not demo/app/node_modules/.vite): nothing about relaywasm. What
// vite prints goes to the test's log if the test fails.
func viteDevServer(t *testing.T) string {
	t.Helper()
	appInstalled(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "vite.config.mjs")
	body := fmt.Sprintf("export default { root: %q, cacheDir: %q, clearScreen: false,\n"+
		"  server: { host: \"127.0.0.1\", port: 0, strictPort: true } };\n", appDir, filepath.Join(dir, "cache"))
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(appDir, "node_modules", ".bin", "vite"), "--config", config)
	cmd.Dir = appDir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // what vite starts goes with it
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The reader keeps reading to the end (vite says where it serves again
	// if it restarts), and said is read only once it has stopped (read).
	var said strings.Builder
	read := make(chan struct{})
	found := make(chan string, 1)
	go func() {
		defer close(read)
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			said.WriteString(lines.Text() + "\n")
			if m := viteLocal.FindStringSubmatch(lines.Text()); m != nil {
				select {
				case found <- m[1]:
				default: // the first one was taken
				}
			}
		}
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-read
		cmd.Wait()
		if t.Failed() {
			t.Logf("vite said:\n%s", said.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startupWait)
	defer cancel()
	select {
	case u := <-found:
		return u
	case <-read:
		t.Fatal("vite exited before it said where it serves")
	case <-ctx.Done():
		t.Fatalf("vite did not say where it serves within %v", startupWait)
	}
	return ""
}
