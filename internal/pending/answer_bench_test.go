package pending

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/tandem-dev/tandem/internal/hub"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/store/sqlite"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// slowStore is a store whose every write takes delay longer, as on a
// remote database or a slow disk; reads are as fast as the store's. puts,
// when set, hears of every new request, once it is on disk; resolved,
// when set, counts the resolutions announced of each request, as written
// to the workspace log.
type slowStore struct {
	store.Store
	delay time.Duration
	puts  chan store.Pending

	mu       sync.Mutex
	seen     map[string]bool
	resolved map[string]int
	// announced, when set, hears of every request announced (its
	// permission.requested or tool.requested written to the log).
	announced chan store.Pending
}

// resolutions is how many resolutions of the request were announced.
func (s *slowStore) resolutions(requestID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resolved[requestID]
}

func (s *slowStore) count(es []store.Event) {
	for _, e := range es {
		resolved := s.resolved != nil && (e.Type == proto.EventPermissionResolved || e.Type == proto.EventToolResolved)
		requested := s.announced != nil && (e.Type == proto.EventPermissionRequested || e.Type == proto.EventToolRequested)
		if !resolved && !requested {
			continue
		}
		var env struct {
			Data struct {
				RequestID string `json:"request_id"`
			} `json:"data"`
		}
		if json.Unmarshal(e.Envelope, &env) != nil {
			continue
		}
		if requested {
			s.announced <- store.Pending{RequestID: env.Data.RequestID, WorkspaceID: e.WorkspaceID}
			continue
		}
		s.mu.Lock()
		s.resolved[env.Data.RequestID]++
		s.mu.Unlock()
	}
}

func (s *slowStore) wait() { time.Sleep(s.delay) }

func (s *slowStore) PutPending(ctx context.Context, p store.Pending) error {
	s.wait()
	err := s.Store.PutPending(ctx, p)
	if err != nil || s.puts == nil {
		return err
	}
	s.mu.Lock()
	fresh := !s.seen[p.RequestID]
	s.seen[p.RequestID] = true
	s.mu.Unlock()
	if fresh {
		s.puts <- p
	}
	return nil
}

func (s *slowStore) ResolvePending(ctx context.Context, wsID, id string, data json.RawMessage) (bool, error) {
	s.wait()
	return s.Store.ResolvePending(ctx, wsID, id, data)
}

func (s *slowStore) SettlePending(ctx context.Context, wsID, id string) error {
	s.wait()
	return s.Store.SettlePending(ctx, wsID, id)
}

func (s *slowStore) DeletePending(ctx context.Context, id string) error {
	s.wait()
	return s.Store.DeletePending(ctx, id)
}

func (s *slowStore) ApproveForSession(ctx context.Context, sessionID, kind string) error {
	s.wait()
	return s.Store.ApproveForSession(ctx, sessionID, kind)
}

func (s *slowStore) AppendEvent(ctx context.Context, e store.Event) error {
	s.wait()
	err := s.Store.AppendEvent(ctx, e)
	if err == nil {
		s.count([]store.Event{e})
	}
	return err
}

func (s *slowStore) AppendEvents(ctx context.Context, es []store.Event) error {
	s.wait()
	err := s.Store.AppendEvents(ctx, es)
	if err == nil {
		s.count(es)
	}
	return err
}

func (s *slowStore) ReserveSeq(ctx context.Context, wsID string, upTo int64) error {
	s.wait()
	return s.Store.ReserveSeq(ctx, wsID, upTo)
}

func (s *slowStore) UpdateSession(ctx context.Context, rec store.Session) error {
	s.wait()
	return s.Store.UpdateSession(ctx, rec)
}

// openSlow returns n open workspaces over one SQLite store made slower by
// delay per write, and the slow store.
func openSlow(tb testing.TB, n int, delay time.Duration) ([]*workspace.Workspace, *slowStore) {
	tb.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "tandem.db"))
	require.NoError(tb, err)
	slow := &slowStore{Store: db, delay: delay, seen: make(map[string]bool)}
	h := hub.New(hub.Config{})
	m := workspace.NewManager(workspace.Config{Store: slow, Hub: h, CreateGrace: time.Hour, DetachGrace: time.Hour})
	tb.Cleanup(func() {
		m.Shutdown(ctx)
		h.Close()
		require.NoError(tb, db.Close())
	})
	wss := make([]*workspace.Workspace, n)
	for i := range wss {
		wss[i], _, err = m.Open(ctx, tb.TempDir())
		require.NoError(tb, err)
	}
	return wss, slow
}

// BenchmarkAnswerAcrossWorkspaces answers one permission request in each
// of 1 and of 64 workspaces at once, over a store made 1 ms slower per
// write; an operation ends when every parked run has its answer. Answers
// in different workspaces share nothing but the store, so 64 workspaces'
// answers should take about the time of one's (at most twice), not 64
// times it. cpu-µs/op is the CPU the process used meanwhile: 64 answers
// need 64 times one's, which a machine short of CPU cannot overlap.
func BenchmarkAnswerAcrossWorkspaces(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("workspaces=%d", n), func(b *testing.B) {
			wss, slow := openSlow(b, n, time.Millisecond)
			slow.announced = make(chan store.Pending, n)
			br := New(slow, nil, nil)
			ctx := context.Background()
			sid := uuid.NewString()
			client := uuid.NewString()
			answers := make(chan Answer, n)
			byID := make(map[string]*workspace.Workspace, n)
			for _, ws := range wss {
				byID[ws.ID] = ws
			}
			// The CPU the answers took, to tell a queue (time with the
			// CPU idle) from a machine with no CPU left.
			var cpu time.Duration
			ops := 0
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				// Park one run in each workspace and wait until each
				// request is announced: clients answer what they heard of.
				for _, ws := range wss {
					ref := Ref{Workspace: ws, SessionID: sid, RunID: uuid.NewString(), ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "bash"}
					go func() {
						ans, _ := br.AskPermission(ctx, ref, "bash", "run ls", nil)
						answers <- ans
					}()
				}
				asked := make([]store.Pending, 0, n)
				for range n {
					asked = append(asked, <-slow.announced)
				}
				b.StartTimer()
				before := cpuTime()

				var wg sync.WaitGroup
				for _, p := range asked {
					wg.Go(func() {
						if _, err := br.AnswerPermission(ctx, byID[p.WorkspaceID], p.RequestID, proto.PermissionAnswer{ClientID: client, Decision: proto.DecisionApproveOnce}); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				for range n {
					if ans := <-answers; ans.Result != proto.ResultApproved {
						b.Fatalf("a parked run got %+v", ans)
					}
				}
				cpu += cpuTime() - before
				ops++
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(ops), "cpu-µs/op")
		})
	}
}
