package relay

// SetStepHook has fn called by every runtime connection's welcome just
// before ("install") and just after ("installed") it is installed as its
// instance's runtime, and by its leave just before ("remove") and just
// after ("removed") it is removed, with no lock held that a browser attach
// takes: a test attaches sockets from fn to put them on either side of the
// change. fn must return at once for steps it does not wait on.
func SetStepHook(r *Relay, fn func(step string)) { r.testHook.Store(&fn) }
