// Command gen writes jsbridge/relayjs/boundary.js from package boundary:
// `go generate ./jsbridge/relayjs` runs it there.
package main

import (
	"os"

	"github.com/relaywasm/relaywasm/jsbridge/boundary"
)

func main() {
	// go generate runs in the folder of the package that asks (relayjs).
	if err := os.WriteFile("boundary.js", []byte(boundary.JS()), 0o644); err != nil {
		println("gen:", err.Error())
		os.Exit(1)
	}
}
