// Command wasmexec runs a GOOS=js test binary in Firefox or WebKit, as
// `go test -exec` runs it:
//
//	go test -exec="wasmexec -engine=webkit" ./tests/browser/
//
// wasmbrowsertest does this for Chromium only. wasmexec serves the test
// binary, the wasm_exec.js of the Go that runs it and a page that runs the
// one with the other; the page hands the program its arguments and this
// process's environment (as wasmbrowsertest does; run.sh keeps it short),
// posts what it writes to stdout and stderr back in order, and finally its
// exit code, which wasmexec exits with. A failing test therefore fails
// `go test` in every engine, and wasmexec names the engine when it does.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/relaywasm/relaywasm/tests/webdriver"
)

// page runs the test binary. Output is batched while a post is in flight
// (one post per burst, in order), and the exit code goes last, after every
// byte written before it.
const page = `<!doctype html>
<meta charset="utf-8">
<title>wasmexec</title>
<script>` + webdriver.Recorder + `</script>
<script src="/wasm_exec.js"></script>
<script>
(() => {
	let queue = [], sending = null, exitCode = null;
	const pump = () => {
		if (sending) return;
		if (queue.length === 0 && exitCode === null) return;
		const parts = queue; queue = [];
		let size = 0;
		for (const p of parts) size += 5 + p.b.length;
		const body = new Uint8Array(size), view = new DataView(body.buffer);
		let at = 0;
		for (const p of parts) {
			body[at] = p.fd; view.setUint32(at + 1, p.b.length); body.set(p.b, at + 5); at += 5 + p.b.length;
		}
		const last = queue.length === 0 && exitCode !== null;
		const url = last ? "/exit?code=" + exitCode : "/out";
		sending = fetch(url, {method: "POST", body}).catch(() => {}).then(() => {
			sending = null;
			if (!last) pump();
		});
	};
	const fail = (e) => {
		const b = new TextEncoder().encode("wasmexec page: " + (e && e.stack ? e.stack : e) + "\n");
		queue.push({fd: 2, b}); exitCode = 3; pump();
	};
	(async () => {
		const cfg = await (await fetch("/config")).json();
		globalThis.fs.writeSync = (fd, buf) => { queue.push({fd, b: buf.slice()}); pump(); return buf.length; };
		const go = new Go();
		go.argv = cfg.argv;
		go.env = cfg.env;
		go.exit = (code) => { exitCode = code; pump(); };
		const {instance} = await WebAssembly.instantiateStreaming(fetch("/test.wasm"), go.importObject);
		await go.run(instance);
	})().catch(fail);
})();
</script>
`

func main() {
	engine := flag.String("engine", os.Getenv("ENGINE"), "firefox or webkit")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wasmexec -engine=firefox|webkit test.wasm [test flags]")
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(webdriver.Engine(*engine), flag.Arg(0), flag.Args()[1:]))
}

func run(engine webdriver.Engine, binary string, args []string) int {
	wasmExec, err := findWasmExec()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmexec:", err)
		return 3
	}
	scratch, err := os.MkdirTemp("", "wasmexec-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmexec:", err)
		return 3
	}
	defer os.RemoveAll(scratch)

	exited := make(chan int, 1)
	srv := &http.Server{Handler: handler(binary, wasmExec, args, exited)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmexec:", err)
		return 3
	}
	go srv.Serve(l)
	defer srv.Close()

	// A hang guard for start-up: over a minute for Firefox with other
	// engines' suites beside it on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	b, err := webdriver.Start(ctx, engine, webdriver.Options{Scratch: scratch})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wasmexec: starting %s: %v\n", engine, err)
		return 3
	}
	defer b.Close()
	fmt.Fprintf(os.Stderr, "wasmexec: running %s in %s\n", filepath.Base(binary), b.Version())

	// The page runs until the program exits; go test's own -timeout ends
	// a hung program (it panics inside the page and exits with 2), and an
	// interrupt ends this process.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Tab().Navigate(ctx, "http://"+l.Addr().String()+"/"); err != nil {
			fmt.Fprintf(os.Stderr, "wasmexec: loading the page in %s: %v\n", engine, err)
			exited <- 3
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	var code int
	select {
	case code = <-exited:
	case <-sig:
		code = 130
	}
	if code != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, p := range b.Tab().Problems(ctx) {
			fmt.Fprintf(os.Stderr, "wasmexec: the page reported %s\n", p)
		}
		cancel()
		fmt.Fprintf(os.Stderr, "wasmexec: %s failed in %s (exit code %d)\n", filepath.Base(binary), b.Version(), code)
	}
	return code
}

// findWasmExec is the wasm_exec.js of the Go on PATH, the one that built
// the test binary.
func findWasmExec() (string, error) {
	root := os.Getenv("GOROOT")
	if root == "" {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOROOT: %w", err)
		}
		root = strings.TrimSpace(string(out))
	}
	p := filepath.Join(root, "lib", "wasm", "wasm_exec.js")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

func handler(testBinary, wasmExec string, args []string, exited chan<- int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, page)
	})
	mux.HandleFunc("GET /wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, wasmExec)
	})
	mux.HandleFunc("GET /test.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, testBinary)
	})
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"argv": append([]string{"js"}, args...), "env": env})
	})
	write := func(body []byte) {
		for len(body) >= 5 {
			fd, n := body[0], binary.BigEndian.Uint32(body[1:5])
			if int(n) > len(body)-5 {
				return
			}
			out := os.Stdout
			if fd == 2 {
				out = os.Stderr
			}
			out.Write(body[5 : 5+n])
			body = body[5+n:]
		}
	}
	mux.HandleFunc("POST /out", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		write(b)
	})
	mux.HandleFunc("POST /exit", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		write(b)
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil {
			code = 3
		}
		select {
		case exited <- code:
		default:
		}
	})
	return mux
}
