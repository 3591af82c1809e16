// Command hellowasm is the baseline of relay.wasm's size: the smallest Go
// program that prints with fmt, built for GOOS=js GOARCH=wasm with the same
// flags. Its size is what any Go module pays for the runtime before doing
// anything; relay.wasm's size beside it is what relaywasm adds.
package main

import "fmt"

func main() {
	fmt.Println("hello, wasm")
}
