package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// A prompt may carry an idempotency key (contract section 5): a client
// that got a timeout or a 5xx retries with the same key, and a prompt
// whose key its session accepted within store.PromptKeyTTL is that run,
// not a second one. The key is stored with the run's run.accepted, in its
// transaction, so it holds on whichever node owns the workspace next and
// after a restart; it is looked up under the session's lock, so two
// retries racing on the owner cannot both start a run.

// checkIdempotencyKey refuses a key that is not 1 to
// proto.MaxIdempotencyKey printable characters ("" is no key).
func checkIdempotencyKey(key string) error {
	if key == "" {
		return nil
	}
	if !utf8.ValidString(key) {
		return apierr.Invalid("idempotency_key must be UTF-8")
	}
	if n := utf8.RuneCountInString(key); n > proto.MaxIdempotencyKey {
		return apierr.Invalid("idempotency_key is %d characters long; at most %d", n, proto.MaxIdempotencyKey)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return apierr.Invalid("idempotency_key must be printable characters, got %q", r)
		}
	}
	return nil
}

// promptKey is what r's run.accepted keeps of its idempotency key; nil
// for none.
func promptKey(r *run) *store.PromptKey {
	if r.key == "" {
		return nil
	}
	return &store.PromptKey{Key: r.key, At: time.Now()}
}

// priorLocked looks up the run the session accepted with r's idempotency
// key within the key's lifetime. When there is one, it returns its state
// now: running, queued (with its position) or, once it has ended,
// completed. Callers hold sr.mu.
func (c *Coordinator) priorLocked(ctx context.Context, sr *sessionRuns, r *run) (runID, state string, position int, found bool, err error) {
	if r.key == "" {
		return "", "", 0, false, nil
	}
	runID, err = c.cfg.Store.PromptByKey(ctx, sr.id, r.key, time.Now().Add(-store.PromptKeyTTL))
	if errors.Is(err, store.ErrNotFound) {
		return "", "", 0, false, nil
	}
	if err != nil {
		return "", "", 0, false, fmt.Errorf("look up the prompt's idempotency key: %w", err)
	}
	active, waiting := sr.current()
	switch i := slices.IndexFunc(waiting, func(q *run) bool { return q.id == runID }); {
	case active != nil && active.id == runID:
		return runID, proto.RunRunning, 0, true, nil
	case i >= 0:
		return runID, proto.RunQueued, i + 1, true, nil
	}
	// Not in memory: ended, or suspended on work a client has still to
	// answer (after a restart or a change of owner), which is not an end.
	pend, err := c.cfg.Store.ListPending(ctx, sr.ws.ID)
	if err != nil {
		return "", "", 0, false, fmt.Errorf("look up the state of run %s: %w", runID, err)
	}
	if slices.ContainsFunc(pend, func(p store.Pending) bool { return p.RunID == runID }) {
		return runID, proto.RunRunning, 0, true, nil
	}
	return runID, proto.RunEnded, 0, true, nil
}
