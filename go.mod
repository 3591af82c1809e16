module github.com/relaywasm/relaywasm

go 1.26.8

require (
	github.com/chromedp/cdproto v0.0.0-20260714215040-dc233986426f
	github.com/chromedp/chromedp v0.16.0
	github.com/coder/acp-go-sdk v0.13.0
	github.com/coder/websocket v1.8.15
)

require (
	github.com/agnivade/wasmbrowsertest v0.11.0 // indirect
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-interpreter/wagon v0.6.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260623181947-01eb4420fa68 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	github.com/google/pprof v0.0.0-20240727154555-813a5fbdbec8 // indirect
	github.com/hack-pad/safejs v0.1.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

tool github.com/agnivade/wasmbrowsertest
