//go:build race

package conformance

// raceEnabled reports a -race build, whose instrumented scanning makes the
// heaviest floods too slow for the raw peers' I/O guards.
const raceEnabled = true
