//go:build !unix

package relay_test

import "time"

// cpuTime is not measured here; the CPU metrics then read 0.
func cpuTime() time.Duration { return 0 }
