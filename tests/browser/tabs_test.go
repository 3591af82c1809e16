//go:build js && wasm

package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall/js"
	"testing"
	"time"
)

// lockSpy lists the names of the Web Locks the page asks for, as it asks
// (LockManager.request is called synchronously by the code under test).
var lockSpy = testModule("lockspy.js", `
export function spy() {
  const asked = [];
  const original = LockManager.prototype.request;
  LockManager.prototype.request = function (name, ...rest) {
    asked.push(String(name));
    return original.call(this, name, ...rest);
  };
  return { asked, restore() { LockManager.prototype.request = original; } };
}`)

// rememberedKey is where tabs.js keeps a page's slot locks for the tab's
// next load (its REMEMBERED).
const rememberedKey = "relaywasm-slots"

// A reload's early slot locks (tabs.js lockRemembered, README "As files")
// keep to their limits: what a page remembered is taken once, only within
// 30 s of its pagehide, at most 8 locks and only relaywasm's; a lock no
// attach takes is let go after 5 s, and one an attach takes is the
// attach's (takeSlot asks for nothing more); rememberSlots keeps the locks
// held and nothing once they are let go.
func TestEarlyLockLimits(t *testing.T) {
	ctx := testContext(t)
	tabs := relayjsModule(t, "tabs.js")
	s := lockSpy(t).Call("spy")
	defer s.Call("restore")
	storage := js.Global().Get("sessionStorage")
	lock := func(i int) string { return fmt.Sprintf("relaywasm:ws://limits.test/%d\x00inst\x00s", i) }
	keep := func(age time.Duration, locks ...any) {
		b, _ := json.Marshal(map[string]any{"at": time.Now().Add(-age).UnixMilli(), "locks": locks})
		storage.Call("setItem", rememberedKey, string(b))
	}
	asked := func() []string {
		var out []string
		a := s.Get("asked")
		for i := range a.Length() {
			out = append(out, a.Index(i).String())
		}
		s.Get("asked").Set("length", 0)
		return out
	}

	keep(31*time.Second, lock(0))
	tabs.Call("lockRemembered")
	if got := asked(); len(got) != 0 || !storage.Call("getItem", rememberedKey).IsNull() {
		t.Fatalf("a list 31 s old: asked for %q and left it kept (%v); want nothing asked and the list taken", got, storage.Call("getItem", rememberedKey))
	}

	keep(time.Second, "other:lock", 7, lock(0))
	tabs.Call("lockRemembered")
	if got := asked(); !slices.Equal(got, []string{lock(0)}) {
		t.Fatalf("a list with a lock not relaywasm's and a number: asked for %q, want only %q", got, lock(0))
	}
	tabs.Call("releaseEarly")
	waitHeld(t, ctx, 0)

	var ten []any
	for i := range 10 {
		ten = append(ten, lock(i))
	}
	keep(time.Second, ten...)
	start := time.Now()
	tabs.Call("lockRemembered")
	if got := asked(); len(got) != 8 {
		t.Fatalf("ten locks remembered: asked for %d, want 8", len(got))
	}
	tabs.Call("lockRemembered")
	if got := asked(); len(got) != 0 {
		t.Fatalf("a second lockRemembered asked for %q, want nothing: the list is read once", got)
	}
	waitHeld(t, ctx, 8)
	waitHeld(t, ctx, 0)
	if since := time.Since(start); since < 5*time.Second {
		t.Fatalf("the untaken locks were let go %v after they were asked for, want 5 s", since)
	}

	// An attach's takeSlot takes the early request for its lock.
	url, instance, name := "ws://limits.test/take", "inst", "s"
	keep(time.Second, "relaywasm:"+url+"\x00"+instance+"\x00"+name)
	tabs.Call("lockRemembered")
	asked()
	slot := must(t, ctx, tabs.Call("takeSlot", url, instance, name))
	if got := asked(); len(got) != 0 || slot.Get("name").String() != name {
		t.Fatalf("takeSlot after the early request: asked for %q more and got slot %q; want nothing more asked and slot %q", got, slot.Get("name"), name)
	}
	tabs.Call("rememberSlots")
	if kept := storage.Call("getItem", rememberedKey); kept.IsNull() || !strings.Contains(kept.String(), "limits.test/take") {
		t.Fatalf("rememberSlots while the slot is held kept %v, want its lock", kept)
	}
	must(t, ctx, slot.Call("release"))
	tabs.Call("rememberSlots")
	if kept := storage.Call("getItem", rememberedKey); !kept.IsNull() {
		t.Fatalf("rememberSlots with no slot held kept %v, want nothing", kept)
	}
}

// A reload's early slot lock is kept while loadRelay loads
// (tabs.js holdEarlyWhile), and for 5 s after, however long the load takes:
// a worker-mode reload in WebKitGTK, starved in make test, attached after
// 5 s, when the lock had been let go, and asked for it again.
func TestEarlyLocksOutlastALoad(t *testing.T) {
	ctx := testContext(t)
	tabs := relayjsModule(t, "tabs.js")
	b, _ := json.Marshal(map[string]any{"at": time.Now().UnixMilli(), "locks": []string{"relaywasm:ws://limits.test/load\x00inst\x00s"}})
	js.Global().Get("sessionStorage").Call("setItem", rememberedKey, string(b))
	var settle js.Value
	executor := js.FuncOf(func(_ js.Value, args []js.Value) any { settle = args[0]; return nil })
	defer executor.Release()
	tabs.Call("lockRemembered")
	tabs.Call("holdEarlyWhile", js.Global().Get("Promise").New(executor))
	waitHeld(t, ctx, 1)
	time.Sleep(5500 * time.Millisecond)
	waitHeld(t, ctx, 1)
	settled := time.Now()
	settle.Invoke()
	waitHeld(t, ctx, 0)
	if since := time.Since(settled); since < 5*time.Second {
		t.Fatalf("the untaken lock was let go %v after the load ended, want 5 s", since)
	}
}

// countLockRequests counts the page's Web Locks requests for lockName
// (navigator.locks.request) until stop.
func countLockRequests(lockName string) (asked func() int, stop func()) {
	locks := js.Global().Get("navigator").Get("locks")
	request := locks.Get("request")
	n := 0
	wrap := js.FuncOf(func(_ js.Value, args []js.Value) any {
		if len(args) > 0 && args[0].Type() == js.TypeString && args[0].String() == lockName {
			n++
		}
		call := []any{locks}
		for _, a := range args {
			call = append(call, a)
		}
		return request.Call("call", call...)
	})
	locks.Set("request", wrap)
	return func() int { return n }, func() {
		js.Global().Get("Reflect").Call("deleteProperty", locks, "request")
		wrap.Release()
	}
}

// waitHeld waits until exactly n of this test's locks are held.
func waitHeld(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		q := must(t, ctx, js.Global().Get("navigator").Get("locks").Call("query"))
		held := 0
		for i := range q.Get("held").Length() {
			if strings.HasPrefix(q.Get("held").Index(i).Get("name").String(), "relaywasm:ws://limits.test/") {
				held++
			}
		}
		if held == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the test's locks held after 15 s, want %d", held, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A page going into the back/forward cache lets its slots' locks go, and
// asks for them again when it is shown from the cache (tabs.js
// suspendSlots and resumeSlots): WPE WebKit 2.38 keeps a cached page's
// locks, which kept the tab's next page from its own slot, and WebKitGTK
// 2.50 lets them go and gives them back to no one. While suspended the slot
// is still the page's (rememberSlots keeps it for the tab's next page), and
// whether it is the page's to dial with (ours, which relay.js asks before
// every dial) waits for resumeSlots; a lock another holder took meanwhile
// stays that holder's, ours then says false, lost resolves (relay.js then
// ends the attachment), and the page's release frees nothing of it.
// tests/e2e has WebKit really cache a page.
func TestSlotsLetGoInTheBackForwardCache(t *testing.T) {
	ctx := testContext(t)
	tabs := relayjsModule(t, "tabs.js")
	storage := js.Global().Get("sessionStorage")
	defer storage.Call("removeItem", rememberedKey)
	url, instance, name := "ws://limits.test/bfcache", "inst", "s"
	lockName := "relaywasm:" + url + "\x00" + instance + "\x00" + name

	slot := must(t, ctx, tabs.Call("takeSlot", url, instance, name))
	lost := fired(slot.Get("lost"))
	waitHeld(t, ctx, 1)
	if !must(t, ctx, slot.Call("ours")).Bool() {
		t.Fatal("ours() of a slot just taken is false")
	}
	tabs.Call("suspendSlots")
	waitHeld(t, ctx, 0)
	ours := settled(slot.Call("ours"))
	select {
	case v := <-ours:
		t.Fatalf("ours() of a suspended slot resolved to %v before resumeSlots", v)
	case <-time.After(200 * time.Millisecond):
	}
	tabs.Call("rememberSlots")
	if kept := storage.Call("getItem", rememberedKey); kept.IsNull() || !strings.Contains(kept.String(), "limits.test/bfcache") {
		t.Fatalf("rememberSlots while suspended kept %v, want the slot's lock", kept)
	}
	// A second suspend, or a pageshow with nothing suspended, changes nothing.
	tabs.Call("suspendSlots")
	must(t, ctx, tabs.Call("resumeSlots"))
	waitHeld(t, ctx, 1)
	if !within(t, ours) || !must(t, ctx, slot.Call("ours")).Bool() {
		t.Fatal("ours() is false for a slot whose lock resumeSlots got back")
	}
	select {
	case <-lost:
		t.Fatal("lost resolved for a slot whose lock resumeSlots got back")
	default:
	}
	asked, stop := countLockRequests(lockName)
	must(t, ctx, tabs.Call("resumeSlots"))
	stop()
	if n := asked(); n != 0 {
		t.Fatalf("resumeSlots with no slot suspended asked %d times for a lock the page holds, want none", n)
	}
	waitHeld(t, ctx, 1)

	// Another holder takes the lock while the page is cached.
	tabs.Call("suspendSlots")
	waitHeld(t, ctx, 0)
	var let js.Value // resolves the other holder's Promise, letting its lock go
	keep := js.FuncOf(func(_ js.Value, args []js.Value) any {
		let = args[0]
		return nil
	})
	defer keep.Release()
	hold := js.FuncOf(func(js.Value, []js.Value) any { return js.Global().Get("Promise").New(keep) })
	defer hold.Release()
	js.Global().Get("navigator").Get("locks").Call("request", lockName, hold)
	waitHeld(t, ctx, 1)
	ours = settled(slot.Call("ours"))
	must(t, ctx, tabs.Call("resumeSlots")) // gives up after tabs.js RELOAD_WAIT_MS
	if within(t, ours) {
		t.Fatal("ours() is true for a slot whose lock another holder took")
	}
	select {
	case <-lost:
	case <-time.After(15 * time.Second):
		t.Fatal("lost still pending after 15 s for a slot whose lock another holder took")
	}
	must(t, ctx, slot.Call("release"))
	time.Sleep(200 * time.Millisecond)
	waitHeld(t, ctx, 1)
	pending := must(t, ctx, js.Global().Get("navigator").Get("locks").Call("query")).Get("pending")
	for i := range pending.Length() {
		if n := pending.Index(i).Get("name").String(); n == lockName {
			t.Fatalf("resumeSlots gave up and its request for %q is still pending", n)
		}
	}
	let.Invoke()
	waitHeld(t, ctx, 0)

	// A slot released while suspended is no longer the page's either.
	other := must(t, ctx, tabs.Call("takeSlot", url, instance, "t"))
	lost = fired(other.Get("lost"))
	tabs.Call("suspendSlots")
	ours = settled(other.Call("ours"))
	must(t, ctx, other.Call("release"))
	if within(t, ours) {
		t.Fatal("ours() is true for a slot released while suspended")
	}
	must(t, ctx, tabs.Call("resumeSlots"))
	waitHeld(t, ctx, 0)
	select {
	case <-lost:
		t.Fatal("lost resolved for a slot released, not taken")
	default:
	}
}

// fired is closed when a Promise resolves.
func fired(p js.Value) <-chan struct{} {
	out := make(chan struct{})
	var then js.Func
	then = js.FuncOf(func(js.Value, []js.Value) any {
		then.Release()
		close(out)
		return nil
	})
	p.Call("then", then)
	return out
}

// settled hands over what a Promise of a boolean resolves to.
func settled(p js.Value) <-chan bool {
	out := make(chan bool, 1)
	var then js.Func
	then = js.FuncOf(func(_ js.Value, args []js.Value) any {
		then.Release()
		out <- args[0].Bool()
		return nil
	})
	p.Call("then", then)
	return out
}

// within waits up to 15 s for what settled hands over.
func within(t *testing.T, ch <-chan bool) bool {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatal("ours() still pending after 15 s")
		return false
	}
}

// Within a page, a slot an attachment of the page is letting go (leave:
// detach or close called, or its attach's signal aborted) is waited for
// by the page's next attach of the stream, which then takes it, instead of
// the next slot: React's StrictMode sets a component's effect up, cleans it
// up and sets it up again at once (tests/e2e TestAttachAgainAtOnce). A slot
// the page holds and is not letting go is skipped, and stays its holder's
// to be waited for once that one lets it go.
func TestSlotBeingLetGoIsWaitedFor(t *testing.T) {
	ctx := testContext(t)
	tabs := relayjsModule(t, "tabs.js")
	const url, instance = "ws://limits.test/again", "inst"
	take := func(name string, signal ...any) js.Value {
		return tabs.Call("takeSlot", append([]any{url, instance, name}, signal...)...)
	}
	// waits checks that the slot p takes is still pending while its holder
	// has not let it go, lets it go, and checks that p then takes it.
	waits := func(what string, p js.Value, holder js.Value) {
		t.Helper()
		taken := named(p)
		select {
		case name := <-taken:
			t.Fatalf("%s: took %s while the page was still letting %s go", what, name, holder.Get("name"))
		case <-time.After(300 * time.Millisecond):
		}
		must(t, ctx, holder.Call("release"))
		select {
		case name := <-taken:
			if want := holder.Get("name").String(); name != want {
				t.Fatalf("%s: took %s, want %s, the slot let go", what, name, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: still waiting 15 s after the slot was let go", what)
		}
	}

	first := must(t, ctx, take("s"))
	beside := must(t, ctx, take("s"))
	if a, b := first.Get("name").String(), beside.Get("name").String(); a != "s" || b != "s#2" {
		t.Fatalf("two slots of the page taken as %s and %s, want s and s#2", a, b)
	}
	first.Call("leave")
	again := take("s")
	waits("after leave", again, first)
	must(t, ctx, beside.Call("release"))
	must(t, ctx, must(t, ctx, again).Call("release"))

	abort := js.Global().Get("AbortController").New()
	aborted := must(t, ctx, take("u", abort.Get("signal")))
	abort.Call("abort")
	retaken := take("u")
	waits("after an abort", retaken, aborted)
	must(t, ctx, must(t, ctx, retaken).Call("release"))
	waitHeld(t, ctx, 0)
}

// named hands over the name of the slot a Promise of takeSlot resolves to.
func named(p js.Value) <-chan string {
	out := make(chan string, 1)
	var then js.Func
	then = js.FuncOf(func(_ js.Value, args []js.Value) any {
		then.Release()
		out <- args[0].Get("name").String()
		return nil
	})
	p.Call("then", then)
	return out
}

// lockChecks runs the same requests through two lock managers, a and b,
// as two contexts (two tabs) make them, and returns what each got: a
// lock's holder's request when another holds it, its wait until the lock
// is let go, a wait that times out, and two asking for a free lock at
// once, five times over.
var lockChecks = testModule("lockchecks.js", `
const hold = (m, name) =>
  new Promise((granted, failed) => {
    let release;
    const held = new Promise((r) => (release = r));
    m.request(name, { ifAvailable: true }, (lock) => {
      granted(lock ? release : null);
      return lock ? held : undefined;
    }).catch(failed);
  });

export async function run(a, b, prefix) {
  const out = [];
  const release = await hold(a, prefix + "x");
  out.push(release !== null, (await hold(b, prefix + "x")) !== null, (await hold(a, prefix + "x")) !== null);
  const waited = b.request(prefix + "x", { signal: AbortSignal.timeout(10000) }, (lock) => lock !== null);
  setTimeout(release, 300);
  out.push(await waited);
  const other = await hold(b, prefix + "y");
  out.push(await a.request(prefix + "y", { signal: AbortSignal.timeout(300) }, () => "granted").catch((e) => e.name));
  other();
  for (let i = 0; i < 5; i++) {
    const both = await Promise.all([hold(a, prefix + "z" + i), hold(b, prefix + "z" + i)]);
    out.push(both.filter((r) => r !== null).length);
    for (const r of both) r?.();
  }
  return out;
}`)

// ChannelLocks (locks.js), tabs.js's stand-in for Web Locks on a page that
// is not a secure context, keeps two contexts apart as Web Locks do: two
// ChannelLocks of one page hear each other over their BroadcastChannel as
// two tabs' do, and answer what navigator.locks answers the same requests
// (tests/e2e TestInsecureContext runs it in pages that lack Web Locks).
func TestChannelLocksAnswerAsWebLocks(t *testing.T) {
	ctx := testContext(t)
	ChannelLocks := relayjsModule(t, "locks.js").Get("ChannelLocks")
	checks := lockChecks(t)
	web := js.Global().Get("navigator").Get("locks")
	want := stringify(must(t, ctx, checks.Call("run", web, web, "web-")))
	got := stringify(must(t, ctx, checks.Call("run", ChannelLocks.New(), ChannelLocks.New(), "channel-")))
	if got != want {
		t.Fatalf("ChannelLocks answered %s, Web Locks %s", got, want)
	}
	if want != `[true,false,false,true,"TimeoutError",1,1,1,1,1]` {
		t.Fatalf("Web Locks answered %s, not what the checks expect of a lock", want)
	}
}

// A holder busy when another context asks for its lock (a long task on its
// thread, a tab's process starved of CPU) answers after ASK_MS: the asker
// took the lock too, and two tabs held one stream (tests/e2e
// TestInsecureContext, once, in WebKitGTK under load). A context that has
// heard of the holder, as one does from the start (who, have), waits for
// it longer (KNOWN_MS); and not that long once it lets go, whether its
// free comes between two asks or during one it never answered.
func TestChannelLocksWaitForABusyHolder(t *testing.T) {
	ctx := testContext(t)
	got := stringify(must(t, ctx, busyLockChecks(t).Call("run", moduleURLs["locks.js"])))
	if got != `[false,true,true]` {
		t.Fatalf("asked while a worker holding the lock was busy, then as it let go, then while it was busy and let go: %s, want [false,true,true]", got)
	}
}

// busyLockChecks has a worker take a lock, then a context of the page start
// and, once the worker has answered its who and is busy for a second, ask
// for the lock; then ask again as the worker lets it go; then, once the
// worker has taken it back, ask while the worker is busy and lets it go
// without answering. The asks return whether they got it; the last two
// must not wait KNOWN_MS. Each races a timer set as it starts, due before
// KNOWN_MS (2 s) would end it: timers run in the order they are due, so a
// page whose thread is starved meanwhile still settles the ask first, and
// only an ask that waited out KNOWN_MS loses.
var busyLockChecks = testModule("busylocks.js", `
export async function run(locksURL) {
  const { ChannelLocks } = await import(locksURL);
  const source = `+"`"+`
    import { ChannelLocks } from "${locksURL}";
    const locks = new ChannelLocks(); // first: it hears each message first
    const heard = new BroadcastChannel("relaywasm-locks");
    let release;
    const take = () => locks.request("busy", { ifAvailable: true }, (lock) => {
      postMessage(lock !== null);
      return new Promise((r) => (release = r));
    });
    const busy = (ms) => {
      postMessage("busy");
      const until = performance.now() + ms;
      while (performance.now() < until);
    };
    take();
    heard.onmessage = ({ data }) => {
      if (data.t === "who") setTimeout(() => busy(1000));
    };
    onmessage = ({ data }) => {
      if (data === "release") release();
      if (data === "take") take();
      if (data === "busy, then let go") {
        busy(500);
        release(); // its free goes before the page's ask is read, unanswered
      }
    };
  `+"`"+`;
  const holder = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })), { type: "module" });
  const said = () => new Promise((r) => holder.addEventListener("message", (e) => r(e.data), { once: true }));
  const inTime = (request) => Promise.race([request, new Promise((r) => setTimeout(() => r("waited KNOWN_MS"), 1800))]);
  try {
    if ((await said()) !== true) throw new Error("the worker did not take the lock");
    const busy = said();
    const locks = new ChannelLocks();
    const quiet = new Promise((r) => setTimeout(() => r("nothing"), 5000));
    if ((await Promise.race([busy, quiet])) !== "busy") throw new Error("the worker heard no who from a ChannelLocks starting");
    const out = [await locks.request("busy", { ifAvailable: true }, (lock) => lock !== null)];
    const again = inTime(locks.request("busy", { signal: AbortSignal.timeout(10000) }, (lock) => lock !== null));
    setTimeout(() => holder.postMessage("release"), 100);
    out.push(await again);

    // The page let go as its callback returned. Once its ChannelLocks has
    // heard the worker take the lock back (the page's channels hear a
    // message in the order they were made), the worker is a known holder.
    const heard = new BroadcastChannel("relaywasm-locks");
    const took = new Promise((r) => (heard.onmessage = ({ data }) => data.t === "took" && r()));
    holder.postMessage("take");
    if ((await said()) !== true) throw new Error("the worker did not take the lock back");
    await took;
    heard.close();
    const busyAgain = said();
    holder.postMessage("busy, then let go");
    await busyAgain;
    out.push(await inTime(locks.request("busy", { signal: AbortSignal.timeout(10000) }, (lock) => lock !== null)));
    return out;
  } finally {
    holder.terminate();
  }
}`)

// Four contexts, two of the page and two of a worker, take one lock in
// turns, each five times, with ifAvailable or waiting for it, and hold it
// for up to half a second of a busy thread: longer than ASK_MS, so a
// holder is often busy when asked, and within KNOWN_MS, which a known
// holder is waited for. No two may hold it at once, and every request that
// waits must get it. Each holder logs when it held the lock (the time of
// the origin, which page and worker share); a context takes the lock at
// least ASK_MS after the last holder let go, so those times cannot
// overlap unless two held it.
func TestChannelLocksKeepHoldersApart(t *testing.T) {
	ctx := testContext(t)
	got := stringify(must(t, ctx, contendedLockChecks(t).Call("run", moduleURLs["locks.js"])))
	var waits, granted int
	if _, err := fmt.Sscanf(got, "[%d,%d,", &waits, &granted); err != nil {
		t.Fatalf("the checks returned %s: %v", got, err)
	}
	if !strings.HasSuffix(got, `,[]]`) || waits != granted {
		t.Fatalf("[waiting requests, of them granted, holds, overlapping holds] = %s, want every waiting request granted and no overlap", got)
	}
}

var contendedLockChecks = testModule("contendedlocks.js", `
const contender = (locksURL) => `+"`"+`
  import { ChannelLocks } from "${locksURL}";
  const log = new BroadcastChannel("relaywasm-test-holds");
  const now = () => performance.timeOrigin + performance.now();
  // play makes five requests and returns how many waited and how many of
  // those were granted.
  export async function play(tag) {
    const locks = new ChannelLocks();
    let waits = 0, granted = 0;
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, Math.random() * 100));
      const wait = Math.random() < 0.5;
      waits += wait;
      await locks.request("contended", wait ? { signal: AbortSignal.timeout(60000) } : { ifAvailable: true }, async (lock) => {
        if (!lock) return;
        granted += wait;
        const from = now();
        const until = performance.now() + Math.random() * 500;
        while (performance.now() < until);
        await new Promise((r) => setTimeout(r, Math.random() * 30));
        log.postMessage([tag, from, now()]);
      });
    }
    return [waits, granted];
  }
`+"`"+`;

export async function run(locksURL) {
  const url = URL.createObjectURL(new Blob([contender(locksURL)], { type: "text/javascript" }));
  const { play } = await import(url);
  const log = new BroadcastChannel("relaywasm-test-holds");
  const holds = [];
  log.onmessage = ({ data }) => holds.push(data);
  const source = "import { play } from '" + url + "'; onmessage = async () => postMessage(await Promise.all([play('w1'), play('w2')]));";
  const worker = new Worker(URL.createObjectURL(new Blob([source], { type: "text/javascript" })), { type: "module" });
  try {
    const inWorker = new Promise((r) => (worker.onmessage = ({ data }) => r(data)));
    worker.postMessage("play");
    const [p1, p2, w] = await Promise.all([play("p1"), play("p2"), inWorker]);
    const counts = [p1, p2, ...w];
    await new Promise((r) => setTimeout(r, 200)); // the last holds' logs
    holds.sort((a, b) => a[1] - b[1]);
    const overlaps = [];
    for (let i = 1; i < holds.length; i++) {
      if (holds[i][1] < holds[i - 1][2]) overlaps.push(holds[i - 1][0] + " and " + holds[i][0]);
    }
    const sum = (k) => counts.reduce((n, c) => n + c[k], 0);
    return [sum(0), sum(1), holds.length, overlaps];
  } finally {
    worker.terminate();
    log.close();
  }
}`)

// A context that takes a lock without having heard an ask under way (its
// own ask ended first) says so (took) and answers the ask once it reads
// it, unless it let go first: then its free follows. The asker heard both
// in TestChannelLocksWaitForABusyHolder run twice in a page (the worker's
// ask began before the page's took and free reached it) and gave up at the
// took, so the worker found the lock taken though nobody held it. A took
// now makes an ask wait for the taker's answer or its free, unless the
// taker is a rival the ask told to wait (tookLockChecks says why).
func TestChannelLocksTookThenFreeDuringAnAsk(t *testing.T) {
	ctx := testContext(t)
	got := stringify(must(t, ctx, tookLockChecks(t).Call("run", moduleURLs["locks.js"])))
	if got != `[true,false,false]` {
		t.Fatalf("asked while another context took and let go, while it took and answered, while it asked and took: %s, want [true,false,false]", got)
	}
}

// tookLockChecks asks for a lock three times while a stand-in for another
// context, on a channel of its own, answers the ask with took then free;
// with took then held; and with an ask of its own, which the page's ask
// tells to wait, then took, as a context does whose ask ended before the
// page's answer came: it may have read the page's ask before asking, and
// will not answer it, so the page must not wait for it and take the lock.
var tookLockChecks = testModule("tooklocks.js", `
export async function run(locksURL) {
  const { ChannelLocks } = await import(locksURL);
  const locks = new ChannelLocks();
  const other = new BroadcastChannel("relaywasm-locks");
  const id = "~other"; // sorts after the page's id: the page's ask goes first
  const answers = [
    (ask) => [{ t: "took", name: ask.name, id }, { t: "free", name: ask.name, id }],
    (ask) => [{ t: "took", name: ask.name, id }, { t: "held", name: ask.name, to: ask.id, id, holds: true }],
    (ask) => [{ t: "ask", name: ask.name, id }, { t: "took", name: ask.name, id }],
  ];
  other.onmessage = ({ data }) => {
    if (data.t !== "ask") return;
    for (const m of answers.shift()?.(data) ?? []) other.postMessage(m);
  };
  try {
    const out = [];
    for (const name of ["took-free", "took-held", "ask-took"]) {
      out.push(await locks.request(name, { ifAvailable: true }, (lock) => lock !== null));
    }
    return out;
  } finally {
    other.close();
  }
}`)
