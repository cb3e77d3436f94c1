//go:build !unix

package pending

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
