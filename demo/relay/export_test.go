package relay

// SetInstallHook has fn called by every runtime's welcome just before
// (false) and just after (true) the runtime is installed as its instance's
// runtime, with no lock held that a browser attach takes: a test attaches
// sockets from fn to put them on either side of the install.
func SetInstallHook(r *Relay, fn func(installed bool)) { r.testInstall.Store(&fn) }
