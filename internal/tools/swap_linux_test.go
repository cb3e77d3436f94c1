//go:build linux

package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// swapper exchanges a directory and a symlink to outside the workspace,
// atomically and as fast as it can, until stopped: the name always exists,
// and is a directory one moment and a link out the next.
type swapper struct {
	stop  chan struct{}
	done  chan struct{}
	swaps atomic.Int64
}

func startSwapper(t *testing.T, a, b string) *swapper {
	t.Helper()
	s := &swapper{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
			s.swaps.Add(1)
		}
	}()
	t.Cleanup(s.halt)
	return s
}

func (s *swapper) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// TestConfinedWhileDirectoriesAreSwapped is defect 10: while another process
// swaps racedir between a directory and a symlink to outside the workspace,
// no file tool ever writes or reads outside.
func TestConfinedWhileDirectoriesAreSwapped(t *testing.T) {
	env := newEnv(t)
	out := outsideDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(out, "secret.txt"), []byte("SECRET outside\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(out, "e.txt"), []byte("SECRET outside\n"), 0o644))
	// A listing of outside shows this name.
	require.NoError(t, os.WriteFile(filepath.Join(out, "SECRET-marker"), nil, 0o644))
	writeFile(t, env, "racedir/secret.txt", "inside\n")
	writeFile(t, env, "racedir/e.txt", "inside\n")
	// A relative link, which os.Root would follow were it not leading out
	// (both temp dirs share a parent).
	rel, err := filepath.Rel(env.Root, out)
	require.NoError(t, err)
	alt := filepath.Join(env.Root, "racedir.alt")
	require.NoError(t, os.Symlink(rel, alt))

	sw := startSwapper(t, filepath.Join(env.Root, "racedir"), alt)
	const workers, rounds = 4, 200
	var wg sync.WaitGroup
	var leaks sync.Map
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				n := w*rounds + i
				calls := []struct {
					name string
					args map[string]any
				}{
					{"write", map[string]any{"path": fmt.Sprintf("racedir/f%d.txt", n), "content": "x"}},
					{"write", map[string]any{"path": fmt.Sprintf("racedir/sub%d/f.txt", n), "content": "x"}},
					{"edit", map[string]any{"path": "racedir/e.txt", "old_string": "SECRET", "new_string": "pwned"}},
					{"view", map[string]any{"path": "racedir/secret.txt"}},
					{"grep", map[string]any{"pattern": "SECRET", "path": "racedir"}},
					{"glob", map[string]any{"pattern": "racedir/*"}},
					{"ls", map[string]any{"path": "racedir"}},
				}
				c := calls[n%len(calls)]
				r := run(t, env, c.name, c.args)
				if strings.Contains(r.Content, "SECRET") {
					leaks.Store(c.name, r.Content)
				}
			}
		})
	}
	wg.Wait()
	sw.halt()
	require.Greater(t, sw.swaps.Load(), int64(workers*rounds/10), "the swapper ran alongside")

	leaks.Range(func(k, v any) bool {
		t.Errorf("%s read outside: %q", k, v)
		return true
	})
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"secret.txt", "e.txt", "SECRET-marker"}, names, "files landed outside the workspace")
	require.Equal(t, "SECRET outside\n", readFile(t, filepath.Join(out, "e.txt")), "edit changed a file outside")
}
