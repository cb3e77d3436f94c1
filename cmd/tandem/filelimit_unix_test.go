//go:build unix

package main

import (
	"bytes"
	"errors"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server holds a descriptor per stream: a soft limit under the hard one
// is raised to it, and the limits are logged, so that an operator can see
// what caps the streams.
func TestFileLimitRaisedToHard(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, max  uint64
		wantSet   bool
		wantSoft  string
		setFails  bool
		wantLevel string
	}{
		{name: "low soft limit", cur: 1024, max: 20000, wantSet: true, wantSoft: "soft=20000 hard=20000", wantLevel: "INFO"},
		{name: "raised by the runtime", cur: 19999, max: 20000, wantSoft: "soft=19999 hard=20000", wantLevel: "INFO"},
		{name: "at the hard limit", cur: 20000, max: 20000, wantSoft: "soft=20000 hard=20000", wantLevel: "INFO"},
		{name: "refused", cur: 1024, max: 20000, wantSet: true, setFails: true, wantSoft: "soft=1024 hard=20000", wantLevel: "WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			var set *syscall.Rlimit
			get := func(res int, lim *syscall.Rlimit) error {
				require.Equal(t, syscall.RLIMIT_NOFILE, res)
				lim.Cur, lim.Max = tc.cur, tc.max
				return nil
			}
			setter := func(res int, lim *syscall.Rlimit) error {
				require.Equal(t, syscall.RLIMIT_NOFILE, res)
				set = lim
				if tc.setFails {
					return errors.New("operation not permitted")
				}
				return nil
			}
			setFileLimit(log, get, setter)
			if tc.wantSet {
				require.NotNil(t, set)
				assert.EqualValues(t, tc.max, set.Cur)
				assert.EqualValues(t, tc.max, set.Max)
			} else {
				assert.Nil(t, set, "a limit already raised is left alone, so that child processes get their original one back")
			}
			assert.Contains(t, logs.String(), tc.wantSoft)
			assert.Contains(t, logs.String(), "level="+tc.wantLevel)
		})
	}
}
