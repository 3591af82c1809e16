package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// firstStorePage runs rounds by itself, each on a database of its own, new
// to the origin as on a first visit. On a round's first load it attaches
// (every other round with relay.wasm in a worker), sends n echo requests
// (each answered with one message) and reloads at the round's moment (the
// round's number mod 4): 0 in its first message's handler, 1 as soon as
// attach resolved, 2 a few milliseconds after its first message, 3 once
// every answer arrived. The reloaded page notes whether the database was
// there and whether a spill (store.js) waited for it, attaches again,
// records what it found (the attachment id, the incoming seqs of
// history()) and starts the next round, until the test's time (until, ms
// since the epoch) is over and at least 4 rounds ran; __s.done then holds
// the results. sessionStorage carries them, and what the first load's
// handler took, across the loads. The page reloads itself, so that the
// reload comes at the moment it picks, not a WebDriver round trip later.
const firstStorePage = `<!doctype html><html lang="en"><title>first store</title>
<script type="module">
import { loadRelay } from "/relay.js";
const q = new URLSearchParams(location.search);
const [run, round, until, n] = [q.get("run"), Number(q.get("round")), Number(q.get("until")), Number(q.get("n"))];
const db = "first-" + run + "-" + round;
const how = round % 4;
const get = (k, d) => JSON.parse(sessionStorage.getItem(k + ":" + db) ?? JSON.stringify(d));
const set = (k, v) => sessionStorage.setItem(k + ":" + db, JSON.stringify(v));
const loads = get("loads", 0) + 1;
set("loads", loads);
const spills = Object.keys(sessionStorage).filter((k) => k.startsWith("relaywasm.spill:" + encodeURIComponent(db) + ":")).length;
const X = (window.__s = { done: null, error: null });
const reload = () => location.reload();
try {
  const existed = loads > 1 && (await indexedDB.databases()).some((d) => d.name === db);
  const worker = round % 2 === 1;
  const relay = await loadRelay({ database: db, worker });
  let fallback = "";
  const got = [];
  const att = await relay.attach({
    url: "ws://" + location.host + "/v1/attach", instance: "demo", token: "dev-token", name: "s", history: 1000,
    onMessage(m, meta) {
      got.push(meta.seq);
      if (loads > 1) return;
      set("took", got.length);
      if (how === 0 && got.length === 1) reload();
      if (how === 2 && got.length === 1) setTimeout(reload, 5 + Math.random() * 50);
      if (how === 3 && got.length === n) reload();
    },
    onState(state, info) {
      if (info?.storage === "memory") fallback = info.reason ?? "memory";
    },
  });
  if (loads === 1) {
    set("session", att.session);
    set("storage", relay.storage);
    for (let i = 1; i <= n; i++) att.sendACP({ jsonrpc: "2.0", id: i, method: "_relaywasm/echo", params: { i } });
    if (how === 1) reload();
  } else {
    const history = (await att.history()).filter((e) => e.message !== undefined && !e.out).map((e) => e.seq);
    const results = JSON.parse(sessionStorage.getItem("results:" + run) ?? "[]");
    results.push({ round, how, worker, existed, spills, took: get("took", 0), before: get("session", ""), after: att.session,
      history, storage: get("storage", ""), storageAfter: relay.storage, fallback });
    sessionStorage.setItem("results:" + run, JSON.stringify(results));
    if (round < 3 || Date.now() < until) {
      q.set("round", String(round + 1));
      location.search = q.toString();
    } else {
      X.done = results;
    }
  }
} catch (e) {
  X.error = String(e?.message ?? e);
}
</script></html>`

// firstStoreRound is one round's result (firstStorePage).
type firstStoreRound struct {
	Round        int    `json:"round"`
	How          int    `json:"how"`
	Worker       bool   `json:"worker"`
	Existed      bool   `json:"existed"`
	Spills       int    `json:"spills"`
	Took         int    `json:"took"`
	Before       string `json:"before"`
	After        string `json:"after"`
	History      []int  `json:"history"`
	Storage      string `json:"storage"`
	StorageAfter string `json:"storageAfter"`
	Fallback     string `json:"fallback"`
}

// reloadMoments names firstStorePage's moments of reloading.
var reloadMoments = []string{"in its first message's handler", "as soon as it attached", "a few ms after its first message", "once every answer arrived"}

// firstStoreFor is how long firstStorePage starts new rounds for: about
// eight on a quiet machine (a round takes about a second there, several
// with the machine busy), and never fewer than the page's four, one for
// each moment. It ran 25 s when it was written, some 160 rounds in WebKit
// over its runs without a loss; make test's time is why it is shorter.
const firstStoreFor = 8 * time.Second

// A page reloaded at once after its first attach on an origin, the one
// whose store created the origin's database, comes back with what it had:
// the database, the same attachment, resumed from the stored cursor, and
// the transcript of every message its handler took. An iOS webview user
// reloading then would otherwise lose the conversation. In WebKit a reload
// aborts the writes the page had not seen commit, and the reloaded page
// finishes them from sessionStorage (store.js's spill): the test logs how
// many rounds came back to one. The page runs the rounds itself
// (firstStorePage), reloading at four moments in turn.
func TestReloadRightAfterTheDatabaseWasCreated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "first.html"), []byte(firstStorePage), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStackServing(t, dir, 0)
	const n = 5
	until := time.Now().Add(firstStoreFor).UnixMilli()
	tb := openTab(t, newBrowser(t), "first", fmt.Sprintf("%sfirst.html?run=%d&round=0&until=%d&n=%d", s.PageURL(), time.Now().UnixNano(), until, n))
	results := waitRounds[firstStoreRound](tb, firstStoreFor)
	spilled := 0
	for _, r := range results {
		if r.Spills > 0 {
			spilled++
		}
		whole := len(r.History) >= r.Took
		for j, seq := range r.History {
			whole = whole && seq == j+1
		}
		if !r.Existed || r.Before == "" || r.After != r.Before || !whole {
			t.Errorf("round %d (worker %v), reloaded %s, its handler having taken %d messages (storage %s, a spill waiting: %v): the database was there: %v; the reloaded page (storage %s %s) has attachment %q, was %q, and the transcript's seqs %v",
				r.Round, r.Worker, reloadMoments[r.How], r.Took, r.Storage, r.Spills > 0, r.Existed, r.StorageAfter, r.Fallback, r.After, r.Before, r.History)
		}
	}
	t.Logf("%d rounds, %d came back to a spill", len(results), spilled)
}

// waitRounds waits until a page that runs rounds by itself (firstStorePage,
// navStorePage) has run them, for about dur, and returns their results,
// which the page leaves in __s.done. The page reloads or navigates itself
// meanwhile: a look the navigation cuts short is tried again.
func waitRounds[R any](tb *tab, dur time.Duration) []R {
	tb.t.Helper()
	deadline := time.Now().Add(dur + 2*waitLimit)
	for {
		var raw string
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tb.page.eval(ctx, `(() => { try { return JSON.stringify(__s.error !== null ? {error: __s.error} : __s.done) } catch { return "null" } })()`, &raw)
		cancel()
		if err == nil && raw != "null" && raw != "" {
			var failed struct{ Error *string }
			if json.Unmarshal([]byte(raw), &failed) == nil && failed.Error != nil {
				tb.t.Fatalf("the page failed: %s", *failed.Error)
			}
			var out []R
			if err := json.Unmarshal([]byte(raw), &out); err != nil {
				tb.t.Fatalf("the page's results %s: %v", raw, err)
			}
			return out
		}
		if time.Now().After(deadline) {
			var at string
			tb.eval(`location.href`, &at)
			tb.t.Fatalf("the page did not finish its rounds (at %s; last look: %v)", at, err)
		}
		time.Sleep(10 * pollEvery)
	}
}
