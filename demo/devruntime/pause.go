package devruntime

import (
	"context"
	"sync"
)

// pause holds every dev agent of a runtime before its turn's chunk number
// from, and each after, while it is on. Tests that interrupt a stream use it
// (Runtime.PauseAt) so that the stream is still under way when they
// interrupt it however slowly the browser got there: at a fixed rate, an
// engine slow to store its first chunks on a loaded machine had seen the
// whole answer before the interruption came.
type pause struct {
	mu      sync.Mutex
	holding chan struct{} // non-nil while paused; closed when released
	from    int           // the first chunk of a turn it holds, while paused
	setup   setupGate     // Runtime.HoldSetup's
}

// wait returns a channel that is ready when the agent may send its turn's
// chunk number i: at once when not paused, or paused from a later chunk.
func (p *pause) wait(i int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding == nil || i < p.from {
		return unpaused
	}
	return p.holding
}

// unpaused is always ready: what wait returns while nothing holds the agents.
var unpaused = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// hold pauses the agents from each turn's chunk number from on until the
// returned release is called; a second hold while paused shares the first
// one's pause, holding from the earlier chunk of the two, and release may be
// called more than once.
func (p *pause) hold(from int) (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding == nil {
		p.holding, p.from = make(chan struct{}), from
	}
	p.from = min(p.from, from)
	h := p.holding
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.holding == h {
			close(h)
			p.holding = nil
		}
	}
}

// setupGate holds every dev agent's answers to initialize and session/new
// while it is on (Runtime.HoldSetup), so that a test can have the page go
// away while a setup request is unanswered and the answer go out while it
// is away, as a runtime that answered slowly would.
type setupGate struct {
	mu      sync.Mutex
	holding chan struct{} // non-nil while on; closed when released
	held    int           // setup answers held since it was turned on
}

// hold turns the gate on until release is called; held says how many setup
// answers it has held since. release may be called more than once.
func (g *setupGate) hold() (held func() int, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := make(chan struct{})
	g.holding, g.held = h, 0
	held = func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.held
	}
	return held, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.holding == h {
			close(h)
			g.holding = nil
		}
	}
}

// wait blocks a setup answer while the gate is on, until it is released or
// ctx ends.
func (g *setupGate) wait(ctx context.Context) {
	g.mu.Lock()
	h := g.holding
	if h != nil {
		g.held++
	}
	g.mu.Unlock()
	if h == nil {
		return
	}
	select {
	case <-h:
	case <-ctx.Done():
	}
}
