package relayleg

// BrowserFrameBytes is the browser leg's frame limit a relay keeps unless it
// is configured otherwise: the dev relay's default (demo/relay
// Limits.BrowserFrameBytes), and the largest message the client engine
// (wasm/client) sends unless told the relay takes more. A browser message
// over the relay's limit is read, discarded and answered with close 4413
// (CodeFrameTooLarge), taking the connection with it, so the client refuses
// it before it leaves instead. The runtime leg's limit is
// librelay.MaxFrameBytes.
const BrowserFrameBytes = 1 << 20
