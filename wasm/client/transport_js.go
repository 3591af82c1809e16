//go:build js

package client

// DefaultTransport is nil in the browser build: coder/websocket's browser
// build loses close codes and would link net/http, so package jsbridge
// supplies the Transport, built on the page's own WebSocket.
var DefaultTransport Transport
