package coordinator

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/proto"
)

var (
	interleavings = flag.Int("interleavings", 10000, "random interleavings TestRandomInterleavings plays")
	seedFlag      = flag.Uint64("seed", 0, "seed of TestRandomInterleavings; 0 picks one")
)

// perHarness is how many interleavings share one harness: a harness's
// in-memory log grows with each, and a restart reads it.
const perHarness = 100

// An accepted run, as the test saw its 202.
type acceptedRun struct {
	id string
	op int
}

// A cancel, with the runs it listed and the tick just after it returned.
// Runs suspended as it came (on disk, waiting on a client) are the
// cancel's to stop too (invariant 4).
type canceled struct {
	op     int
	listed []string
	after  int64
}

// play is one interleaving of one session: what the test did and saw.
type play struct {
	sessionID string
	ops       []string
	accepted  []acceptedRun
	steered   []string // the run ids steers joined
	cancels   []canceled
	restarts  []int // op indices of restarts (crashes or not)
	deletedAt int   // op index of the delete; -1 when none
}

func (p *play) disruptedAfter(op int) bool {
	for _, c := range p.cancels {
		if c.op > op {
			return true
		}
	}
	if slices.ContainsFunc(p.restarts, func(r int) bool { return r > op }) {
		return true
	}
	return p.deletedAt > op
}

func (p *play) crashedAfter(op int) bool {
	return slices.ContainsFunc(p.restarts, func(r int) bool { return r > op })
}

// TestRandomInterleavings plays random interleavings of prompt, steer,
// compact, cancel, delete, answer, client death and restart (clean or a
// crash) on a session while its runs execute, and checks the contract's
// run invariants after each (section 5): every 202 yields exactly one
// run.completed; every run listed in canceled_runs ends canceled; a run
// accepted before a cancel ends canceled unless it committed to another
// end first; a run no cancel, delete or restart came after ends normally;
// no two runs of a session execute at once; nothing runs once a delete
// returned, and a deleted session takes no prompt. The seed is printed on
// failure: -seed=N plays the same operations again.
func TestRandomInterleavings(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *interleavings
	if testing.Short() {
		n = min(n, 1000)
	}
	// Independent players, each its own server: they share no state, and
	// one's waits overlap another's work.
	const players = 2
	t.Logf("seed %d: %d interleavings", seed, n)
	for w := range players {
		t.Run(fmt.Sprintf("player%d", w), func(t *testing.T) {
			t.Parallel()
			rnd := rand.New(rand.NewPCG(seed, uint64(w)))
			var h *harness
			for i := w; i < n; i += players {
				if h == nil || i/players%perHarness == 0 {
					if h != nil {
						h.stop()
					}
					h = newHarness(t)
				}
				p, err := playOne(h, rnd)
				if err == nil {
					err = check(h, p)
				}
				if err != nil {
					t.Fatalf("seed %d, player %d, interleaving %d: %v\noperations: %s", seed, w, i, err, strings.Join(p.ops, ", "))
				}
			}
		})
	}
}

// ops and their weights.
var ops = []struct {
	name   string
	weight int
}{
	{"prompt", 24}, {"park", 8}, {"steer", 12}, {"compact", 5}, {"cancel", 12}, {"step", 22},
	{"answer", 7}, {"client-death", 4}, {"delete", 3}, {"restart", 2}, {"crash", 2},
}

func pick(rnd *rand.Rand) string {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := rnd.IntN(total)
	for _, o := range ops {
		if n < o.weight {
			return o.name
		}
		n -= o.weight
	}
	panic("unreachable")
}

func playOne(h *harness, rnd *rand.Rand) (*play, error) {
	ctx := context.Background()
	p := &play{sessionID: h.quickSession(), deletedAt: -1}
	sid := p.sessionID
	n := 3 + rnd.IntN(8)
	for op := range n {
		name := pick(rnd)
		p.ops = append(p.ops, name)
		deleted := p.deletedAt >= 0
		var (
			acc proto.PromptAccepted
			err error
		)
		switch name {
		case "prompt", "park":
			acc, err = h.prompt(sid, name+" "+fmt.Sprint(op))
		case "steer":
			acc, err = h.steer(sid, "steer "+fmt.Sprint(op))
		case "compact":
			acc, err = h.c.Compact(ctx, h.ws.ID, sid)
		case "cancel":
			ids, cerr := h.c.Cancel(ctx, h.ws.ID, sid)
			if deleted {
				if apierr.ErrorCode(cerr) != proto.CodeSessionNotFound {
					return p, fmt.Errorf("cancel of a deleted session: %v", cerr)
				}
				continue
			}
			if cerr != nil {
				return p, fmt.Errorf("cancel: %v", cerr)
			}
			p.cancels = append(p.cancels, canceled{op: op, listed: ids, after: h.rec.tick.Add(1)})
			continue
		case "step":
			h.gates.step(sid)
			continue
		case "answer":
			h.broker.answer(sid)
			continue
		case "client-death":
			// A client that goes away has its tool calls answered as
			// errors (toolset.DropClient): its runs go on.
			h.broker.clientGone(sid)
			continue
		case "delete":
			if deleted {
				continue
			}
			if err := h.sessions.Delete(ctx, h.ws.ID, sid); err != nil {
				return p, fmt.Errorf("delete: %v", err)
			}
			h.rec.mu.Lock()
			h.rec.deleted[sid] = true
			h.rec.mu.Unlock()
			p.deletedAt = op
			continue
		case "restart", "crash":
			h.restart(name == "crash")
			p.restarts = append(p.restarts, op)
			continue
		}
		// A prompt, a steer or a compaction.
		if deleted {
			if apierr.ErrorCode(err) != proto.CodeSessionNotFound {
				return p, fmt.Errorf("%s of a deleted session: got %v, want %s", name, err, proto.CodeSessionNotFound)
			}
			continue
		}
		if err != nil {
			return p, fmt.Errorf("%s: %v", name, err)
		}
		if acc.State == proto.RunSteered {
			p.steered = append(p.steered, acc.RunID)
			continue
		}
		p.accepted = append(p.accepted, acceptedRun{id: acc.RunID, op: op})
	}
	return p, h.settle(sid)
}

// check checks the run invariants on what one interleaving did.
func check(h *harness, p *play) error {
	rec := h.rec
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.broken) > 0 {
		return fmt.Errorf("%s", strings.Join(rec.broken, "; "))
	}
	if busy, queued := h.c.State("", p.sessionID); busy || queued > 0 {
		return fmt.Errorf("session still busy after it settled")
	}
	deleted := p.deletedAt >= 0
	ids := map[string]bool{}
	for _, a := range p.accepted {
		ids[a.id] = true
		ends := rec.outcomes[a.id]
		if len(ends) > 1 {
			return fmt.Errorf("run %s ended %d times: %v", a.id, len(ends), ends)
		}
		final := ""
		if len(ends) == 1 {
			final = ends[0]
		}
		if !deleted {
			count, logged := h.db.completions(a.id)
			if count != 1 {
				return fmt.Errorf("run %s (accepted at op %d) has %d run.completed, want 1 (invariant 1)", a.id, a.op, count)
			}
			final = logged
		}
		crashed := p.crashedAfter(a.op)
		if final == proto.OutcomeInterrupted && !crashed {
			return fmt.Errorf("run %s ended interrupted with no crash after it", a.id)
		}
		if !p.disruptedAfter(a.op) && final != proto.OutcomeEndTurn {
			return fmt.Errorf("run %s, accepted at op %d with no cancel, delete or restart after, ended %q (invariants 3, 4)", a.id, a.op, final)
		}
		for _, c := range p.cancels {
			if c.op < a.op {
				continue
			}
			if slices.Contains(c.listed, a.id) {
				if final != proto.OutcomeCanceled && !(crashed && final == proto.OutcomeInterrupted) && final != "" {
					return fmt.Errorf("run %s listed by the cancel at op %d ended %q (invariant 2)", a.id, c.op, final)
				}
				continue
			}
			if final == proto.OutcomeEndTurn {
				if tick, ok := rec.commits[a.id]; !ok || tick > c.after {
					return fmt.Errorf("run %s accepted before the cancel at op %d was not listed, yet committed after it (invariant 4)", a.id, c.op)
				}
			}
		}
		if deleted && final == "" && rec.started[a.id] > 0 && !h.broker.wasSuspended(a.id) {
			return fmt.Errorf("run %s of the deleted session started and never ended", a.id)
		}
	}
	for _, c := range p.cancels {
		for _, id := range c.listed {
			if !ids[id] {
				return fmt.Errorf("the cancel at op %d listed %s, not a run of this session's 202s", c.op, id)
			}
		}
	}
	for _, id := range p.steered {
		if !ids[id] {
			return fmt.Errorf("a steer joined %s, not a run of this session's 202s", id)
		}
	}
	return nil
}
