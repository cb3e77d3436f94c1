//go:build !linux

package sqlite

import (
	"testing"

	"github.com/tandem-dev/tandem/internal/store"
)

// breakDisk needs RLIMIT_FSIZE as Linux applies it; elsewhere the
// conformance suite's fault test fails rather than pass untested.
func breakDisk(t *testing.T, _ store.Store) (heal func()) {
	t.Fatal("sqlite: no way to fill the disk on this OS; run the conformance suite on Linux")
	return func() {}
}
