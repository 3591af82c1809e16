package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/devruntime"
	"github.com/relaywasm/relaywasm/demo/stack"
)

// The demo page when the relay answers but the agent's machine (the runtime)
// is not connected to it: opened while the machine is off, and when the
// machine leaves in the middle of a conversation. The relay tells the page
// why (unknown_instance, runtime_gone), and the page says so: the network is
// not at fault, and it cannot promise that the conversation continues where
// it left off. It said "Reconnecting to the relay. The conversation will
// continue where it left off." for as long as the machine stayed away,
// even on a first load with nothing to continue, or with a wrong instance
// name, where it never comes.
func TestDemoPageAgentMachineAway(t *testing.T) {
	t.Parallel()
	s := startFreshStack(t, stack.Config{WebDir: webDir, ModuleDir: moduleDir, Logger: logger(), RelayOnly: true})
	t.Cleanup(func() { s.Close() })

	tb := openTab(t, newBrowser(t), "tab", s.PageURL())
	checkAgentAwayNote(tb, "opened while the agent's machine is off", "unknown_instance")

	// The machine comes: the page chats.
	stop := runOwnRuntime(t, s)
	tb.waitReady()
	tb.prompt("ping")
	tb.waitFor("the answer to ping", lastAgentDone)
	var note string
	tb.eval(`document.getElementById("conn-note").hidden ? "" : document.getElementById("conn-note").textContent`, &note)
	if note != "" {
		t.Errorf("connected, the page still says %q", note)
	}

	// The machine leaves in the middle of the conversation.
	stop()
	checkAgentAwayNote(tb, "after the agent's machine left", "runtime_gone", "unknown_instance")
	var gone bool
	tb.eval(`__chat.states.some(s => s.code === "runtime_gone")`, &gone)
	if !gone {
		t.Errorf("the relay never told the page runtime_gone; states %+v", tb.chat().States)
	}
}

// checkAgentAwayNote waits until the page's last connection state carries one
// of codes and checks, in the same look, what the page says then.
func checkAgentAwayNote(tb *tab, when string, codes ...string) {
	tb.t.Helper()
	var shown struct {
		Code, State, Note, Status, Title string
	}
	deadline := time.Now().Add(waitLimit)
	for {
		tb.eval(`({
			code: window.__chat?.states.at(-1)?.code ?? "", // WebKit may run the page's module after the load event
			state: window.__chat?.state ?? "",
			note: document.getElementById("conn-note").hidden ? "" : document.getElementById("conn-note").textContent,
			status: document.getElementById("status-text").textContent,
			title: document.getElementById("status").title,
		})`, &shown)
		if slices.Contains(codes, shown.Code) {
			break
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: the page never heard %v; page state: %s", when, codes, tb.snapshot())
		}
		time.Sleep(pollEvery)
	}
	tb.t.Logf("%s: %s (%s): status %q, note %q", when, shown.State, shown.Code, shown.Status, shown.Note)
	if !strings.Contains(shown.Note, "agent's machine is not connected") || strings.Contains(shown.Note, "continue") {
		tb.t.Errorf("%s (%s), the page says %q; want that the agent's machine is not connected, and no promise that the conversation continues", when, shown.Code, shown.Note)
	}
	if strings.Contains(shown.Status, "Reconnecting") || !strings.Contains(shown.Title, "agent's machine") {
		tb.t.Errorf("%s (%s), the status says %q (%q); want the agent's machine named, not a reconnection", when, shown.Code, shown.Status, shown.Title)
	}
}

// runOwnRuntime runs a dev runtime for s's instance, as the stack's own would
// run, and waits until the relay has welcomed it. stop ends it, as a machine
// switched off ends its runtime: the relay tells the pages attached to it
// runtime_gone.
func runOwnRuntime(t *testing.T, s *stack.Stack) (stop func()) {
	t.Helper()
	cfg := s.Config()
	rt, err := devruntime.New(devruntime.Config{
		Relay: s.HTTPURL(), Instance: cfg.Instance, Credential: cfg.RuntimeToken,
		RelayKey: s.PublicKey(), Logger: logger().With("part", "runtime"), AgentRate: streamRate,
	})
	if err != nil {
		t.Fatal(err)
	}
	welcomed := rt.Connected()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the runtime ended with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-welcomed:
	case err := <-done:
		done <- err // for stop
		t.Fatalf("the runtime stopped before the relay welcomed it: %v", err)
	case <-time.After(startupWait):
		t.Fatal("the relay did not welcome the runtime")
	}
	return stop
}
