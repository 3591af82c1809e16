// Command bundle writes what jsbridge/relayjs ships (relay.js, worker.js and
// preload.js bundled, and their TypeScript declarations) into a folder:
//
//	go run ./jsbridge/bundle/cmd/bundle -o dist
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/relaywasm/relaywasm/jsbridge/bundle"
)

func main() {
	out := flag.String("o", "dist", "the folder to write to")
	flag.Parse()
	if err := bundle.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
}
