package webdriver

import (
	"context"
)

// RecorderKey is the sessionStorage key under which Recorder keeps what it
// caught; sessionStorage survives a reload of the tab, so a problem that
// happened before a reload is still read after it.
const RecorderKey = "__relaywasm_problems"

// Recorder is a classic script a page runs first (before its modules) to
// record its own uncaught exceptions, unhandled rejections and
// console.error calls in sessionStorage. WebKitWebDriver has no log
// endpoint and refuses BiDi, so this is the only way a WebKit test learns
// that its page broke; Tab.Problems reads it in every engine that has it.
const Recorder = `(() => {
	const key = "` + RecorderKey + `";
	const note = (what) => {
		try {
			const list = JSON.parse(sessionStorage.getItem(key) || "[]");
			list.push(String(what).slice(0, 2000));
			sessionStorage.setItem(key, JSON.stringify(list));
		} catch (_) {}
	};
	const text = (v) => {
		if (v instanceof Error) return v.name + ": " + v.message;
		if (typeof v === "object" && v !== null) { try { return JSON.stringify(v); } catch (_) {} }
		return String(v);
	};
	addEventListener("error", (e) => note("uncaught: " + (e.error ? text(e.error) : e.message)));
	addEventListener("unhandledrejection", (e) => note("unhandled rejection: " + text(e.reason)));
	const error = console.error.bind(console);
	console.error = (...args) => { note("console.error: " + args.map(text).join(" ")); error(...args); };
})();`

// recorded reads what Recorder caught in the tab's page.
func recorded(ctx context.Context, t Tab) []string {
	var list []string
	if err := t.Eval(ctx, `JSON.parse(sessionStorage.getItem("`+RecorderKey+`") || "[]")`, &list); err != nil {
		return []string{"reading the page's recorder: " + err.Error()}
	}
	return list
}
