package devruntime

import "sync"

// pause holds every dev agent of a runtime before its next chunk while it is
// on. Tests that interrupt a stream use it (Runtime.Pause) so that the stream
// is still under way when they interrupt it however slowly the browser got
// there: at a fixed rate, an engine slow to store its first chunks on a
// loaded machine had seen the whole answer before the interruption came.
type pause struct {
	mu      sync.Mutex
	holding chan struct{} // non-nil while paused; closed when released
}

// wait returns a channel that is ready when the agent may go on: at once when
// not paused.
func (p *pause) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding == nil {
		return unpaused
	}
	return p.holding
}

// unpaused is always ready: what wait returns while nothing holds the agents.
var unpaused = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// hold pauses the agents until the returned release is called; a second hold
// while paused shares the first one's pause, and release may be called more
// than once.
func (p *pause) hold() (release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding == nil {
		p.holding = make(chan struct{})
	}
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
