//go:build unix

package main

import (
	"log/slog"
	"syscall"
)

// raiseFileLimit raises the soft limit on open files to the hard limit, as
// a server that holds a connection per stream needs (10,000 streams are
// 10,000 descriptors), and logs both limits: beyond the hard limit, only
// the operator can raise it (systemd's LimitNOFILE, limits.conf).
//
// Go's runtime already raises the soft limit at start to one under the
// hard limit, and gives the processes it starts (a tool's shell) the
// original one back; a call to Setrlimit would end that, so the limit is
// set only where it is still lower.
func raiseFileLimit(log *slog.Logger) {
	setFileLimit(log, syscall.Getrlimit, syscall.Setrlimit)
}

func setFileLimit(log *slog.Logger, get, set func(int, *syscall.Rlimit) error) {
	var lim syscall.Rlimit
	if err := get(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open files limit", "err", err)
		return
	}
	if lim.Cur+1 < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := set(syscall.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("cannot raise the open files limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
			return
		}
		lim = raised
	}
	log.Info("open files limit", "soft", lim.Cur, "hard", lim.Max)
}
