// preload.js: starts fetching and compiling relay.wasm (the one beside
// relay.js) at once, for the loadRelay that comes later. A page's modules
// run only once all of them have loaded, so relay.js itself cannot start
// the compile any earlier than the page calls loadRelay; a page that loads
// preload.js first, in a script of its own ahead of the app's,
//
//   <script type="module" src="/relaywasm/preload.js"></script>
//   <script type="module" src="/app.js"></script>
//
// has the compile run while the rest of its modules load. On a reload it
// also asks for the slot locks the page held (tabs.js lockRemembered),
// which loadRelay would otherwise ask for as it starts. It does nothing else
// and exports nothing; loadRelay works the same without it.

import { preload } from "./compile.js";
import { lockRemembered } from "./tabs.js";

preload(new URL("./relay.wasm", import.meta.url));
lockRemembered();
