package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/internal/toolset"
	"github.com/tandem-dev/tandem/internal/workspace"
	"github.com/tandem-dev/tandem/proto"
)

// memStore keeps in memory what the workspaces, the session service and
// the coordinator write, so that the state machine's tests play thousands
// of interleavings in seconds. It embeds a nil store.Store: a method these
// tests do not need panics.
type memStore struct {
	store.Store

	mu          sync.Mutex
	workspaces  []store.Workspace
	sessions    map[string]store.Session
	events      []store.Event
	attachments map[string][]store.Attachments
	// completed counts each run's run.completed events, and outcome is
	// the last one's outcome; a delete does not forget them.
	completed map[string]int
	outcome   map[string]string
	// checkpoints are the Rewinds role's (rewind_test.go).
	checkpoints []store.Checkpoint
	// pending is what ListPending lists.
	pending []store.Pending
}

func newMemStore() *memStore {
	return &memStore{
		sessions: map[string]store.Session{}, attachments: map[string][]store.Attachments{},
		completed: map[string]int{}, outcome: map[string]string{},
	}
}

func (s *memStore) EnsureWorkspace(_ context.Context, w store.Workspace) (store.Workspace, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, got := range s.workspaces {
		if got.Path == w.Path {
			return got, false, nil
		}
	}
	s.workspaces = append(s.workspaces, w)
	return w, true, nil
}

func (s *memStore) GetWorkspace(_ context.Context, id string) (store.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.workspaces {
		if w.ID == id {
			return w, nil
		}
	}
	return store.Workspace{}, store.ErrNotFound
}

func (s *memStore) ListWorkspaces(context.Context) ([]store.Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.workspaces), nil
}

func (s *memStore) update(id string, f func(*store.Workspace)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.workspaces {
		if s.workspaces[i].ID == id {
			f(&s.workspaces[i])
			return nil
		}
	}
	return store.ErrNotFound
}

func (s *memStore) ReserveSeq(_ context.Context, id string, upTo int64) error {
	return s.update(id, func(w *store.Workspace) { w.SeqReserved = max(w.SeqReserved, upTo) })
}

func (s *memStore) SetRecoveredThrough(_ context.Context, id string, seq int64) error {
	return s.update(id, func(w *store.Workspace) { w.RecoveredThrough = max(w.RecoveredThrough, seq) })
}

func (s *memStore) MaxSeq(_ context.Context, id string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var seq int64
	for _, e := range s.events {
		if e.WorkspaceID == id {
			seq = max(seq, e.Seq)
		}
	}
	return seq, nil
}

func (s *memStore) AppendEvent(ctx context.Context, e store.Event) error {
	return s.AppendEvents(ctx, []store.Event{e})
}

func (s *memStore) AppendEvents(_ context.Context, es []store.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		if a := e.Attachments; a != nil {
			s.attachments[e.RunID] = append(s.attachments[e.RunID], *a)
		}
		if e.Type == proto.EventRunCompleted {
			delete(s.attachments, e.RunID)
			s.completed[e.RunID]++
			s.outcome[e.RunID] = decodeOutcome(e.Envelope)
		}
		e.Message, e.MessageJSON, e.Usage, e.Attachments, e.Session = nil, nil, nil, nil, nil
		s.events = append(s.events, e)
	}
	return nil
}

func (s *memStore) WorkspaceEvents(_ context.Context, id string, after, upTo int64, limit int) ([]store.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Event
	for _, e := range s.events {
		if e.WorkspaceID == id && e.Seq > after && (upTo <= 0 || e.Seq <= upTo) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.Event) int { return int(a.Seq - b.Seq) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (s *memStore) RunAttachments(_ context.Context, runID string) ([]store.Attachments, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attachments[runID]), nil
}

func (s *memStore) PromptByKey(_ context.Context, sessionID, key string, since time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range slices.Backward(s.events) {
		if k := e.PromptKey; k != nil && e.SessionID == sessionID && k.Key == key && !k.At.Before(since) {
			return e.RunID, nil
		}
	}
	return "", store.ErrNotFound
}

func (s *memStore) CreateSession(_ context.Context, rec store.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[rec.ID]; ok {
		return store.ErrExists
	}
	s.sessions[rec.ID] = rec
	return nil
}

func (s *memStore) GetSession(_ context.Context, wsID, id string) (store.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.sessions[id]
	if !ok || rec.WorkspaceID != wsID {
		return store.Session{}, store.ErrNotFound
	}
	return rec, nil
}

func (s *memStore) UpdateSession(_ context.Context, rec store.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[rec.ID]; !ok {
		return store.ErrNotFound
	}
	s.sessions[rec.ID] = rec
	return nil
}

func (s *memStore) ListSessions(_ context.Context, wsID string) ([]store.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Session
	for _, rec := range s.sessions {
		if rec.WorkspaceID == wsID {
			out = append(out, rec)
		}
	}
	return out, nil
}

// DeleteSession removes the session and its events, as the real stores do.
func (s *memStore) DeleteSession(_ context.Context, wsID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.sessions[id]; !ok || rec.WorkspaceID != wsID {
		return store.ErrNotFound
	}
	delete(s.sessions, id)
	s.events = slices.DeleteFunc(s.events, func(e store.Event) bool { return e.SessionID == id })
	s.checkpoints = slices.DeleteFunc(s.checkpoints, func(c store.Checkpoint) bool { return c.SessionID == id })
	return nil
}

func (s *memStore) ListMessages(context.Context, string) ([]proto.Message, error) { return nil, nil }

func (s *memStore) Close() error { return nil }

// completions returns the run.completed events of the run in the log
// (deleted ones too), and the last one's outcome.
func (s *memStore) completions(runID string) (count int, outcome string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.completed[runID], s.outcome[runID]
}

func decodeOutcome(envelope []byte) string {
	// The fake runner's run.completed has its outcome as its only string
	// value past the run id: find it without a schema.
	const key = `"outcome":"`
	i := strings.Index(string(envelope), key)
	if i < 0 {
		return ""
	}
	rest := string(envelope[i+len(key):])
	return rest[:strings.IndexByte(rest, '"')]
}

// records is what the fake runners saw, across restarts: the runs they
// ran and how each ended, and every breach of the run invariants they
// could see as it happened.
type records struct {
	tick atomic.Int64

	mu       sync.Mutex
	active   map[string]string   // session -> the run executing
	outcomes map[string][]string // run -> the ends it was given, written or not
	epochs   map[string]int      // run -> the runner generation that ended it
	commits  map[string]int64    // run -> tick taken just before its Commit won
	started  map[string]int      // run -> how many times it started anew
	deleted  map[string]bool     // sessions whose delete returned
	steers   map[string]int      // run -> steered prompts it took
	// given is each run as the runner last got it.
	given map[string]agent.Run
	// began hears of the runs that begin, while it has room.
	began chan string
	// last hears of the runs that reach their last step, while it has room.
	last   chan string
	broken []string
}

func newRecords() *records {
	return &records{
		active: map[string]string{}, outcomes: map[string][]string{}, epochs: map[string]int{},
		commits: map[string]int64{}, started: map[string]int{}, deleted: map[string]bool{}, steers: map[string]int{},
		given: map[string]agent.Run{}, began: make(chan string, 16), last: make(chan string, 16),
	}
}

func (r *records) breach(format string, args ...any) {
	r.broken = append(r.broken, fmt.Sprintf(format, args...))
}

func (r *records) begin(ar *agent.Run, fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sessionID, runID := ar.SessionID, ar.ID
	r.given[runID] = *ar
	select {
	case r.began <- runID:
	default:
	}
	if other := r.active[sessionID]; other != "" {
		r.breach("run %s of session %s started while run %s was executing (invariant 7)", runID, sessionID, other)
	}
	if r.deleted[sessionID] {
		r.breach("run %s started after its session %s was deleted", runID, sessionID)
	}
	if fresh {
		r.started[runID]++
	}
	r.active[sessionID] = runID
}

func (r *records) end(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active[sessionID] = ""
}

func (r *records) ended(runID, outcome string, epoch int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes[runID] = append(r.outcomes[runID], outcome)
	r.epochs[runID] = epoch
}

// gates hold each session's runs between their steps: a test lets one
// step go at a time, or opens the gate for good.
type gates struct {
	mu     sync.Mutex
	m      map[string]chan struct{}
	opened map[string]bool
}

func (g *gates) get(sessionID string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]chan struct{}{}
	}
	ch := g.m[sessionID]
	if ch == nil {
		ch = make(chan struct{}, 64)
		g.m[sessionID] = ch
	}
	return ch
}

// step lets one step of the session's run go, if one waits for it.
func (g *gates) step(sessionID string) {
	g.mu.Lock()
	opened := g.opened[sessionID]
	g.mu.Unlock()
	if opened {
		return
	}
	select {
	case g.get(sessionID) <- struct{}{}:
	default:
	}
}

// open lets every step of the session's runs go from now on.
func (g *gates) open(sessionID string) {
	ch := g.get(sessionID)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.opened == nil {
		g.opened = map[string]bool{}
	}
	if !g.opened[sessionID] {
		g.opened[sessionID] = true
		close(ch)
	}
}

// fakeRunner runs a run in two steps, each let go by its session's gate;
// a run whose prompt starts with "park" first waits on a client (the fake
// broker), as a run whose tool call waits on a client does. It writes
// run.completed as the real one does, unless its server crashed (dead).
type fakeRunner struct {
	rec    *records
	gates  *gates
	broker *fakeBroker
	epoch  int
	dead   atomic.Bool
}

func (f *fakeRunner) complete(ar *agent.Run, outcome string) agent.Result {
	if f.dead.Load() {
		// The process is gone: nothing more reaches the disk.
		return agent.Result{Outcome: outcome}
	}
	if ar.Ending != nil {
		ar.Ending() // as the real runner does, before run.completed
	}
	if _, err := ar.Workspace.Record(context.WithoutCancel(context.Background()), workspace.Draft{
		Type: proto.EventRunCompleted, SessionID: ar.SessionID, RunID: ar.ID,
		Data: proto.RunCompleted{RunID: ar.ID, Outcome: outcome},
	}); err != nil {
		f.rec.mu.Lock()
		f.rec.breach("run.completed of %s not written: %v", ar.ID, err)
		f.rec.mu.Unlock()
	}
	f.rec.ended(ar.ID, outcome, f.epoch)
	return agent.Result{Outcome: outcome}
}

func (f *fakeRunner) takeSteers(ar *agent.Run, final bool) int {
	if ar.Steers == nil {
		return 0
	}
	n := len(ar.Steers(final))
	if n > 0 {
		f.rec.mu.Lock()
		f.rec.steers[ar.ID] += n
		f.rec.mu.Unlock()
	}
	return n
}

func (f *fakeRunner) Execute(ctx context.Context, ar *agent.Run) agent.Result {
	if ar.Revive == "" && !f.dead.Load() {
		// As the real runner does: Recover tells a run that started from
		// one that never did by it.
		if _, err := ar.Workspace.Record(context.Background(), workspace.Draft{
			Type: proto.EventRunStarted, SessionID: ar.SessionID, RunID: ar.ID, Data: proto.RunStarted{RunID: ar.ID},
		}); err != nil {
			f.rec.mu.Lock()
			f.rec.breach("run.started of %s not written: %v", ar.ID, err)
			f.rec.mu.Unlock()
		}
	}
	f.rec.begin(ar, ar.Revive == "")
	defer f.rec.end(ar.SessionID)
	if ar.Revive == agent.ReviveInterrupt {
		return f.complete(ar, proto.OutcomeInterrupted)
	}
	if ar.Revive == agent.ReviveCancel {
		return f.complete(ar, proto.OutcomeCanceled)
	}
	if ar.Revive == agent.ReviveContinue {
		// Back in memory, it settles what it waited on as it goes on:
		// an answer from now on reaches the run, not a revival.
		f.broker.settled(ar.ID)
	}
	stopped := func() bool { return ctx.Err() != nil || (ar.Canceled != nil && ar.Canceled()) }
	if ar.Revive == "" && strings.HasPrefix(ar.Prompt, "park") {
		answered, parked := f.broker.park(ar.SessionID, ar.ID)
		select {
		case <-answered:
		case <-ctx.Done():
			if ar.Canceled == nil || !ar.Canceled() {
				// Its workspace closed under it: it waits on its client
				// still, suspended, and ends when answered.
				if f.broker.suspend(parked) {
					return agent.Result{Suspended: true}
				}
			}
			f.broker.unpark(ar.ID)
		}
	}
	gate := f.gates.get(ar.SessionID)
	for step := 0; ; step++ {
		f.takeSteers(ar, false)
		if stopped() {
			return f.complete(ar, proto.OutcomeCanceled)
		}
		if step >= 1 {
			if f.takeSteers(ar, true) > 0 {
				continue
			}
			break
		}
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	if stopped() {
		return f.complete(ar, proto.OutcomeCanceled)
	}
	// Its last step: a cancel may meet it after it looked and before it
	// commits to its end, and then Commit says so.
	select {
	case f.rec.last <- ar.ID:
	default:
	}
	select {
	case <-gate:
	case <-ctx.Done():
	}
	tick := f.rec.tick.Add(1)
	if ar.Commit != nil && !ar.Commit() {
		return f.complete(ar, proto.OutcomeCanceled)
	}
	f.rec.mu.Lock()
	f.rec.commits[ar.ID] = tick
	f.rec.mu.Unlock()
	return f.complete(ar, proto.OutcomeEndTurn)
}

func (f *fakeRunner) EndUnstarted(_ context.Context, ars []*agent.Run) {
	for _, ar := range ars {
		f.rec.begin(ar, true)
		if ar.Canceled != nil && !ar.Canceled() {
			f.rec.mu.Lock()
			f.rec.breach("run %s ended unstarted without a cancel", ar.ID)
			f.rec.mu.Unlock()
		}
		f.complete(ar, proto.OutcomeCanceled)
		f.rec.end(ar.SessionID)
	}
}

// parked is a run waiting on a client.
type parked struct {
	sessionID, runID string
	answered         chan struct{}
}

// fakeBroker is the pending work of parked runs: in memory, and kept
// across restarts as the store keeps it.
type fakeBroker struct {
	hooks func() *Hooks
	ws    func() *workspace.Workspace

	// parks is signaled when a run parks.
	parks chan struct{}

	mu        sync.Mutex
	parked    map[string]*parked // run -> waiting in memory
	suspended map[string]*parked // run -> waiting with no run in memory
	answers   int
	// ever are the runs that were suspended at some point.
	ever map[string]bool
}

func newFakeBroker() *fakeBroker {
	return &fakeBroker{parks: make(chan struct{}, 1), parked: map[string]*parked{}, suspended: map[string]*parked{}, ever: map[string]bool{}}
}

func (b *fakeBroker) park(sessionID, runID string) (<-chan struct{}, *parked) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &parked{sessionID: sessionID, runID: runID, answered: make(chan struct{})}
	b.parked[runID] = p
	select {
	case b.parks <- struct{}{}:
	default:
	}
	return p.answered, p
}

func (b *fakeBroker) unpark(runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.parked, runID)
}

// suspend keeps a parked run's request once its run left memory; false
// when it was answered meanwhile.
func (b *fakeBroker) suspend(p *parked) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.parked[p.runID] != p {
		return false
	}
	delete(b.parked, p.runID)
	b.suspended[p.runID] = p
	b.ever[p.runID] = true
	return true
}

// crashed: the runs parked in a process that died are suspended.
func (b *fakeBroker) crashed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, p := range b.parked {
		b.suspended[id] = p
		b.ever[id] = true
		delete(b.parked, id)
	}
}

// answer answers the session's oldest waiting request: a parked run goes
// on, a suspended one is revived, as the real broker does.
func (b *fakeBroker) answer(sessionID string) bool {
	b.mu.Lock()
	var p *parked
	revive := false
	for _, q := range b.parked {
		if q.sessionID == sessionID {
			p = q
			delete(b.parked, q.runID)
			close(q.answered)
			break
		}
	}
	if p == nil {
		for _, q := range b.suspended {
			if q.sessionID == sessionID {
				p, revive = q, true
				delete(b.suspended, q.runID)
				break
			}
		}
	}
	if p != nil {
		b.answers++
	}
	b.mu.Unlock()
	if revive {
		b.hooks().Answered(b.ws(), p.sessionID, p.runID)
	}
	return p != nil
}

func (b *fakeBroker) waiting(sessionID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.parked {
		if p.sessionID == sessionID {
			n++
		}
	}
	for _, p := range b.suspended {
		if p.sessionID == sessionID {
			n++
		}
	}
	return n
}

func (b *fakeBroker) Pending(context.Context, string, string) (proto.PendingWork, error) {
	return proto.PendingWork{Permissions: []proto.PermissionRequest{}, ToolCalls: []proto.ToolCallRequest{}}, nil
}

func (b *fakeBroker) UnfinishedRuns(_ context.Context, _, sessionID string) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range []map[string]*parked{b.parked, b.suspended} {
		for id, p := range m {
			if p.sessionID == sessionID {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (b *fakeBroker) AnswerPermission(_ context.Context, _ *workspace.Workspace, requestID string, _ proto.PermissionAnswer) (string, error) {
	return "answered " + requestID, nil
}

func (b *fakeBroker) AnswerToolCall(context.Context, *workspace.Workspace, string, proto.ToolCallAnswer) error {
	return nil
}

func (b *fakeBroker) Interrupt(_ context.Context, _ *workspace.Workspace, runID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.suspended, runID)
	return nil
}

func (b *fakeBroker) CancelRun(ctx context.Context, ws *workspace.Workspace, runID string) error {
	return b.Interrupt(ctx, ws, runID)
}

func (b *fakeBroker) CancelSession(_ context.Context, _ *workspace.Workspace, sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, p := range b.suspended {
		if p.sessionID == sessionID {
			delete(b.suspended, id)
		}
	}
}

// fakeTools is the tool set: it counts what runs bound and sessions forgot.
type fakeTools struct {
	mu         sync.Mutex
	bound      map[string]bool
	configs    map[string]toolset.RunConfig // of the runs bound
	forgotten  []string
	registered []string
	refuse     error
}

func (t *fakeTools) Register(_, sessionID, clientID string, _ []proto.ToolSpec) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refuse != nil {
		return t.refuse
	}
	t.registered = append(t.registered, sessionID+"/"+clientID)
	return nil
}

func (t *fakeTools) Bind(runID string, rc toolset.RunConfig) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bound == nil {
		t.bound, t.configs = map[string]bool{}, map[string]toolset.RunConfig{}
	}
	t.bound[runID], t.configs[runID] = true, rc
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.bound, runID)
	}
}

func (t *fakeTools) ForgetSession(sessionID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgotten = append(t.forgotten, sessionID)
}

// echoProvider is the provider a configured run gets; the fake runner
// never calls it.
type echoProvider struct{}

func (echoProvider) Stream(context.Context, provider.Request, func(provider.Delta)) (provider.Response, error) {
	return provider.Response{}, nil
}

// clientGone answers the session's calls parked in memory as a client that
// went away does: with an error, and the runs go on.
func (b *fakeBroker) clientGone(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, p := range b.parked {
		if p.sessionID == sessionID {
			delete(b.parked, id)
			close(p.answered)
		}
	}
}

// suspendedRuns lists the session's suspended runs.
func (b *fakeBroker) suspendedRuns(sessionID string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id, p := range b.suspended {
		if p.sessionID == sessionID {
			out = append(out, id)
		}
	}
	return out
}

func (b *fakeBroker) wasSuspended(runID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ever[runID]
}

// run returns the run as the runner last got it.
func (r *records) run(runID string) (agent.Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar, ok := r.given[runID]
	return ar, ok
}

// outcome returns how the run ended, "" while it has not.
func (r *records) outcome(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ends := r.outcomes[runID]; len(ends) > 0 {
		return ends[len(ends)-1]
	}
	return ""
}

// settled forgets a suspended run's request: its revived run has it.
func (b *fakeBroker) settled(runID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.suspended, runID)
}
