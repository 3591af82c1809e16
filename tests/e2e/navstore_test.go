package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// navStorePage runs rounds by itself, as firstStorePage does, each on a
// database of its own, new to the origin. On a round's first load it
// attaches (every other round with relay.wasm in a worker), sends n echo
// requests (each answered with one message), then one every 10 ms, so
// that commits are queued and written as it leaves, and, 5-55 ms after its
// first message, navigates to another page of the origin (navAwayPage), which
// comes back at once: by loading this page's URL again (rounds 0 and 1 mod
// 4) or by going back in the history (2 and 3 mod 4; WebKit and Firefox
// may then show this very page again from the back/forward cache). The
// page that comes back notes whether the database was there, whether it is
// the page that left (persisted), attaches again (or, restored, keeps its
// attachment and waits for the answer to one more echo), records what it found (the attachment id, the incoming
// seqs of history(), the storage and its fallback's reason) and starts the
// next round, until the test's time (until, ms since the epoch) is over
// and at least 4 rounds ran; __s.done then holds the results. With
// back=1 in its URL every round comes back in the history, and with key=i
// history() is told by the echoes' result.i rather than by seq (for a
// runtime that numbers no messages).
const navStorePage = `<!doctype html><html lang="en"><title>nav store</title>
<script type="module">
import { loadRelay } from "/relay.js";
const q = new URLSearchParams(location.search);
const [run, round, until, n] = [q.get("run"), Number(q.get("round")), Number(q.get("until")), Number(q.get("n"))];
const db = "nav-" + run + "-" + round;
const back = q.get("back") === "1" || Math.floor(round / 2) % 2 === 1;
const keyOf = q.get("key") === "i" ? (e) => e.message?.result?.i ?? -1 : (e) => e.seq;
const get = (k, d) => JSON.parse(sessionStorage.getItem(k + ":" + db) ?? JSON.stringify(d));
const set = (k, v) => sessionStorage.setItem(k + ":" + db, JSON.stringify(v));
const loads = get("loads", 0) + 1;
set("loads", loads);
const spills = () => Object.keys(sessionStorage).filter((k) => k.startsWith("relaywasm.spill:" + encodeURIComponent(db) + ":")).length;
const X = (window.__s = { done: null, error: null });
const leave = () => {
  const away = new URLSearchParams({ to: location.href, back: back ? "1" : "" });
  location.href = "/navaway.html?" + away;
};
addEventListener("pagehide", (ev) => set("hidden", ev.persisted ? "persisted" : "unloaded"));
const finish = async (relay, att, fallback, persisted, existed, began) => {
  const history = (await att.history()).filter((e) => e.message !== undefined && !e.out).map(keyOf);
  const results = JSON.parse(sessionStorage.getItem("results:" + run) ?? "[]");
  results.push({ round, back, worker: round % 2 === 1, existed,
    persisted, hidden: get("hidden", ""), spills: persisted ? 0 : spills(), took: get("took", 0), before: get("session", ""),
    after: att.session, history, storage: get("storage", ""), storageAfter: relay.storage, fallback: fallback(), ms: Date.now() - began });
  sessionStorage.setItem("results:" + run, JSON.stringify(results));
  if (round < 3 || Date.now() < until) {
    q.set("round", String(round + 1));
    location.href = location.pathname + "?" + q;
  } else {
    X.done = results;
  }
};
try {
  const began = Date.now();
  const existed = loads > 1 && (await indexedDB.databases()).some((d) => d.name === db);
  const relay = await loadRelay({ database: db, worker: round % 2 === 1, ...(q.has("window") ? { commitWindowMs: Number(q.get("window")) } : {}) });
  let fallback = "";
  let [shown, finishing] = [null, false]; // when the page was shown again from the back/forward cache
  const got = [];
  const att = await relay.attach({
    url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "s", history: 1000,
    onMessage(m, meta) {
      got.push(meta.seq);
      if (loads > 1) return;
      if (shown === null) set("took", got.length);
      if (got.length === 1) setTimeout(leave, 5 + Math.random() * 50);
      if (shown !== null && !finishing) {
        finishing = true;
        finish(relay, att, () => fallback, true, true, shown).catch((e) => (X.error = String(e?.message ?? e)));
      }
    },
    onState(state, info) {
      if (info?.storage === "memory") fallback = info.reason ?? "memory";
    },
  });
  if (loads === 1) {
    set("session", att.session);
    set("storage", relay.storage);
    let i = 0;
    const echo = () => att.sendACP({ jsonrpc: "2.0", id: ++i, method: "_relaywasm/echo", params: { i } });
    addEventListener("pageshow", (ev) => {
      if (!ev.persisted) return;
      shown = Date.now();
      // Its answer comes after the commits of all the handler took before
      // (onMessage). Again until one is answered: a send the connection
      // dropped as the page was cached or shown fails (at most once), and
      // this runtime never sends an answer it gave while the page was away.
      echo();
      const again = setInterval(() => (finishing ? clearInterval(again) : echo().catch(() => {})), 500);
    });
    while (i < n) echo();
    const more = setInterval(echo, 10);
    addEventListener("pagehide", () => clearInterval(more));
  } else {
    await finish(relay, att, () => fallback, false, existed, began);
  }
} catch (e) {
  X.error = String(e?.message ?? e);
}
</script></html>`

// navAwayPage is the page navStorePage leaves for: it comes back as soon
// as it has loaded (after its load event, so that the navigation is an
// ordinary one, not one that replaces this page in the history).
const navAwayPage = `<!doctype html><html lang="en"><title>away</title>
<script>
const q = new URLSearchParams(location.search);
addEventListener("load", () => setTimeout(() => (q.get("back") ? history.back() : (location.href = q.get("to"))), 0));
</script></html>`

// navStoreRound is one round's result (navStorePage).
type navStoreRound struct {
	Round        int    `json:"round"`
	Back         bool   `json:"back"`
	Worker       bool   `json:"worker"`
	Existed      bool   `json:"existed"`
	Persisted    bool   `json:"persisted"`
	Hidden       string `json:"hidden"`
	Spills       int    `json:"spills"`
	Took         int    `json:"took"`
	Before       string `json:"before"`
	After        string `json:"after"`
	History      []int  `json:"history"`
	Storage      string `json:"storage"`
	StorageAfter string `json:"storageAfter"`
	Fallback     string `json:"fallback"`
	Ms           int    `json:"ms"`
}

// navStoreFor is how long navStorePage starts new rounds for (never fewer
// than its four).
const navStoreFor = 8 * time.Second

// A page that navigates to another page of its origin a few milliseconds
// after its first message, and is come back to (its URL loaded again, or
// back in the history), finds what it had: IndexedDB, not memory, the same
// attachment, and the transcript of every message its handler took. In
// WebKitGTK the page left goes into the back/forward cache, where a write
// of its store that had not yet sent its commit never ends: the page that
// came back by the URL waited 10 s for it (BLOCKED_LIMIT_MS) and fell back
// to memory, with a new attachment and no transcript (an iOS webview user
// returning to the chat would see the conversation gone), and a write made
// in its pagehide lost its entries once the page was shown again (store.js,
// cached and crossed).
//
// In worker mode the page that left commits what its handler took that
// the worker had not committed yet itself (remote.js): they had been left
// to the worker, which is cached with the page and never sent them when the
// page was come back to by its URL (61 taken, 20 in the transcript in
// WebKit; 16 and 3 in Chromium). The worker's own commits of them, which
// still come when the page is shown again (and in Chromium sometimes as it
// goes into the cache), store nothing twice: the transcript holds each
// message once, in every round and mode.
func TestNavigateAwayRightAfterTheFirstMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, page := range map[string]string{"nav.html": navStorePage, "navaway.html": navAwayPage} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startStackServing(t, dir, 0)
	const n = 5
	until := time.Now().Add(navStoreFor).UnixMilli()
	tb := openTab(t, newBrowser(t), "nav", fmt.Sprintf("%snav.html?run=%d&round=0&until=%d&n=%d", s.PageURL(), time.Now().UnixNano(), until, n))
	results := waitRounds[navStoreRound](tb, navStoreFor)
	restored := 0
	for _, r := range results {
		t.Logf("round %d (worker %v): came back %s in %d ms, storage %s, took %d, transcript %d", r.Round, r.Worker,
			map[bool]string{true: "restored", false: "loaded"}[r.Persisted], r.Ms, r.StorageAfter, r.Took, len(r.History))
		if r.Persisted {
			restored++
		}
		gapless := true
		for j, seq := range r.History {
			gapless = gapless && seq == j+1
		}
		// gapless also means no message twice: seqs count up from 1 by one.
		whole := gapless && len(r.History) >= r.Took
		if !r.Existed || r.Before == "" || r.After != r.Before || r.StorageAfter != "indexeddb" || !whole {
			how := map[bool]string{true: "back in the history", false: "by its URL"}[r.Back]
			t.Errorf("round %d (worker %v), navigated away 5-55 ms after its first message and come back %s, its handler having taken %d messages (storage %s): the database was there: %v; the page come back (restored from the cache: %v; storage %s %s, after %d ms) has attachment %q, was %q, and the transcript's seqs %v",
				r.Round, r.Worker, how, r.Took, r.Storage, r.Existed, r.Persisted, r.StorageAfter, r.Fallback, r.Ms, r.After, r.Before, r.History)
		}
	}
	t.Logf("%d rounds, %d came back to the page restored from the back/forward cache", len(results), restored)
}

// A page come back to with Back, against a runtime that numbers no
// messages (seq 0) and never resumes (contenox as it ships), has each of
// its handler's messages once in its transcript. In WebKit the store
// gives up on its writes in flight as the page goes into the back/forward
// cache and writes them again once it is shown; WebKitGTK often commits
// such a write all the same, and the restored page stored a whole run of
// messages twice (history() keyed by the echoes' i: [1..10, 1..10, 12]),
// in 2 restored rounds in 10 in either mode: what was stored already was
// told by seq only (store.js skipStored, crossed). Every round goes back,
// in main-thread and worker mode by turns.
func TestNavigateAwayAndBackUnnumbered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, page := range map[string]string{"nav.html": navStorePage, "navaway.html": navAwayPage} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startFreshStack(t, stack.Config{
		WebDir: dir, ModuleDir: moduleDir, Logger: logger(),
		EditRuntime: func(c *devruntime.Config) { c.NoResume = true },
	})
	t.Cleanup(func() { s.Close() })
	const n = 5
	until := time.Now().Add(navBackFor).UnixMilli()
	tb := openTab(t, newBrowser(t), "nav", fmt.Sprintf("%snav.html?run=%d&round=0&until=%d&n=%d&back=1&key=i&window=0", s.PageURL(), time.Now().UnixNano(), until, n))
	results := waitRounds[navStoreRound](tb, navBackFor)
	restored := 0
	for _, r := range results {
		if r.Persisted {
			restored++
		}
		seen := map[int]bool{}
		var twice []int
		for _, i := range r.History {
			if seen[i] {
				twice = append(twice, i)
			}
			seen[i] = true
		}
		t.Logf("round %d (worker %v): came back %s in %d ms, storage %s, took %d, transcript %d", r.Round, r.Worker,
			map[bool]string{true: "restored", false: "loaded"}[r.Persisted], r.Ms, r.StorageAfter, r.Took, len(r.History))
		if len(twice) > 0 || len(r.History) < r.Took || r.StorageAfter != "indexeddb" {
			t.Errorf("round %d (worker %v), come back in the history (restored from the cache: %v), its handler having taken %d messages: storage %s %s, the transcript's echoes %v, twice: %v",
				r.Round, r.Worker, r.Persisted, r.Took, r.StorageAfter, r.Fallback, r.History, twice)
		}
	}
	t.Logf("%d rounds, %d came back to the page restored from the back/forward cache", len(results), restored)
}

// navBackFor is how long TestNavigateAwayAndBackUnnumbered starts new
// rounds for: about 10 rounds in WebKitGTK.
const navBackFor = 12 * time.Second
