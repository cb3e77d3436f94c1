package benchkit

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// HostSteal is the time the hypervisor ran something else while this
// machine's CPUs wanted to run, summed over them (Linux's /proc/stat); 0
// where that is not known. On a virtual machine the host can take the CPUs
// away for milliseconds at a time, which shows in a benchmark's p99 and says
// nothing about the server.
func HostSteal() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ, 100 on every Linux ABI Go runs on
}
