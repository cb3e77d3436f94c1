package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

const (
	// requestTimeout bounds one REST call of the CLI; the run itself may
	// last as long as it needs.
	requestTimeout = 30 * time.Second
	// maxStdinPrompt bounds a prompt piped on stdin, below the server's
	// default body limit.
	maxStdinPrompt = 8 << 20
	// maxShown bounds a tool's arguments or output echoed on stderr: the
	// line is a hint of activity, not the content.
	maxShown = 100
)

// runOptions are the flags and argument of tandem run.
type runOptions struct {
	clientOptions
	session    string
	newSession bool
	yes        bool
	model      string
	prompt     string
	// steer sends the prompt into the session's running run (delivery
	// steer) rather than queueing it.
	steer bool
	// compact makes it tandem compact: no prompt, a compaction run of the
	// session, which must exist.
	compact bool
}

func parseRun(args []string, env *cliEnv) (runOptions, error) {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: tandem run [flags] "prompt"

Sends the prompt to the agent of the current directory's workspace, in its
last session, and streams the answer to stdout. Tool activity and permission
questions go to stderr. With no prompt argument and stdin not a terminal, the
prompt is read from stdin. Exit status: 0 when the turn ended, 130 when it
was canceled (Ctrl-C), 1 on error. At the end the run's token usage (and
cost, when the model's prices are known) goes to stderr.

With --steer the prompt joins the session's running run instead of waiting
for it: the model reads it at its next step, and tandem run follows that
run to its end (Ctrl-C cancels that run, whoever started it). With no run
going on, it runs as usual.

flags:
`)
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "print the session's event envelopes, one JSON object per line, instead of the answer's text")
	fs.StringVar(&o.session, "session", "", "continue this session instead of the last one")
	fs.BoolVar(&o.newSession, "new", false, "start a new session")
	fs.BoolVar(&o.yes, "yes", false, "approve every permission the run asks (once each)")
	fs.StringVar(&o.model, "model", "", "PROVIDER/MODEL for the session (a new one is created with it; an existing one is switched to it)")
	fs.BoolVar(&o.steer, "steer", false, "send the prompt into the session's running run (it reads it at its next step) instead of queueing it")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return o, err
	}
	if o.session != "" && o.newSession {
		return o, errors.New("--session and --new exclude each other")
	}
	if o.steer && o.newSession {
		return o, errors.New("--steer joins a session's running run; a --new session has none")
	}
	o.prompt = strings.Join(rest, " ")
	if strings.TrimSpace(o.prompt) == "" && len(rest) == 0 && !env.stdinTTY {
		raw, err := io.ReadAll(io.LimitReader(env.stdin, maxStdinPrompt))
		if err != nil {
			return o, fmt.Errorf("read prompt from stdin: %w", err)
		}
		o.prompt = string(raw)
	}
	if strings.TrimSpace(o.prompt) == "" {
		return o, errors.New(`no prompt: tandem run "what to do"`)
	}
	return o, nil
}

// runCommand is tandem run.
func runCommand(args []string, env *cliEnv) int {
	o, err := parseRun(args, env)
	if err != nil {
		return usageError(env, "run", err)
	}
	r := &runner{o: o, env: env, perms: map[string]string{}}
	return r.main()
}

// runner is one tandem run.
type runner struct {
	o   runOptions
	env *cliEnv
	scr *screen

	// mu is held while the prompt is posted, so that a Ctrl-C's cancel is
	// sent after the 202: sent before, it would find the session idle, do
	// nothing, and the prompt would then run anyway. It guards the fields
	// the signal goroutine reads.
	mu        sync.Mutex
	b         *backend
	ws        proto.Workspace
	sessionID string
	runID     string

	// prompting is set once the prompt may have reached the server: from
	// then on a Ctrl-C cancels the run rather than quitting.
	prompting    atomic.Bool
	interrupted  atomic.Bool
	cancelFailed atomic.Bool

	// Only the event loop touches these.
	lastMessage string
	perms       map[string]string // request id -> what was asked, for the resolution's line
	ask         *asker
}

func (r *runner) main() int {
	r.scr = newScreen(r.env.stdout, r.env.stderr, r.env.stderrTTY && !r.o.json, r.env.stdoutTTY)
	defer r.scr.Close()

	ctx, abort := context.WithCancel(context.Background())
	defer abort()
	sigs, stopSignals := r.env.signals()
	defer stopSignals()
	watching := make(chan struct{})
	defer close(watching)
	go r.watchSignals(sigs, abort, watching)

	code, err := r.exec(ctx)
	if err != nil {
		if r.interrupted.Load() && ctx.Err() != nil {
			if r.cancelFailed.Load() {
				return exitError
			}
			r.scr.Line("tandem: interrupted")
			return exitCanceled
		}
		r.scr.Close()
		return fail(r.env, "run", err)
	}
	return code
}

// watchSignals turns Ctrl-C into what fits the phase: before the prompt is
// posted there is nothing to cancel, so it quits; after, it cancels the run
// and lets the command wait for run.completed; a second one quits at once.
func (r *runner) watchSignals(sigs <-chan os.Signal, abort func(), done <-chan struct{}) {
	count := 0
	for {
		select {
		case <-done:
			return
		case <-sigs:
		}
		count++
		r.interrupted.Store(true)
		switch {
		case count > 1:
			r.scr.Line("tandem: interrupted again, not waiting for the run to end")
			abort()
		case !r.prompting.Load():
			abort()
		default:
			r.scr.Line("tandem: canceling the run (Ctrl-C again to quit at once)")
			r.scr.Status("canceling…")
			go r.cancelRun(abort)
		}
	}
}

// cancelRun sends the cancel of the session's runs once the prompt's post
// has returned.
func (r *runner) cancelRun(abort func()) {
	r.mu.Lock()
	b, wsID, sid, runID := r.b, r.ws.ID, r.sessionID, r.runID
	r.mu.Unlock()
	if runID == "" {
		// The prompt was refused or never answered: no run to wait for.
		abort()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := b.c.Cancel(ctx, wsID, sid); err != nil {
		r.scr.Line("tandem run: cancel: %v", explain(err))
		r.cancelFailed.Store(true)
		abort()
	}
}

// exec runs the command and returns its exit code, or the error that ended
// it before the run had an outcome.
func (r *runner) exec(ctx context.Context) (int, error) {
	b, err := r.o.connect(ctx, r.env, true)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	dir, err := currentDir(r.env)
	if err != nil {
		return 0, err
	}
	ws, _, err := b.c.CreateWorkspace(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("open workspace %s: %w", dir, explain(err))
	}
	r.mu.Lock()
	r.b, r.ws = b, ws
	r.mu.Unlock()
	sid, err := r.pickSession(ctx)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.sessionID = sid
	r.mu.Unlock()

	// The stream is open, and the server has said so, before the prompt is
	// posted: a run's first events would otherwise be gone before we look.
	stream, err := b.c.Events(ctx, ws.ID, client.EventsOptions{SessionID: sid})
	if err != nil {
		return 0, fmt.Errorf("open event stream: %w", explain(err))
	}
	defer stream.Close()
	for {
		ev, err := stream.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("open event stream: %w", err)
		}
		if ev.Type == proto.EventStreamOpened {
			break
		}
	}

	if r.env.stdinTTY && !r.o.yes {
		r.ask = newAsker(r, r.env.stdin)
		askCtx, stopAsking := context.WithCancel(ctx)
		// An answer in flight is let through before the server may stop.
		defer func() { stopAsking(); <-r.ask.done }()
		go r.ask.loop(askCtx)
	}

	acc, err := r.post(ctx)
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		// Interrupted while the prompt was in flight but before the
		// signal goroutine knew: cancel what got accepted.
		cctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		_, _ = b.c.Cancel(cctx, ws.ID, sid)
		return 0, ctx.Err()
	}
	switch {
	case acc.State == proto.RunQueued:
		r.scr.Line("tandem: queued behind another run of this session (position %d)", acc.Position)
		r.scr.Status("queued…")
	case acc.State == proto.RunSteered && !r.o.json:
		r.scr.Line("tandem: steered into the running run %s; following it to its end", acc.RunID)
		r.scr.Status("thinking…")
	case r.o.compact:
		r.scr.Status("compacting…")
	default:
		r.scr.Status("thinking…")
	}

	rc, err := r.wait(ctx, b, stream)
	if err != nil {
		return 0, err
	}
	r.scr.Close()
	if rc.Usage != nil && !r.o.json {
		r.scr.Line("tandem: %s", formatUsage(*rc.Usage))
	}
	switch rc.Outcome {
	case proto.OutcomeEndTurn:
		return exitOK, nil
	case proto.OutcomeCanceled:
		r.scr.Line("tandem: run canceled")
		return exitCanceled, nil
	case proto.OutcomeError:
		if rc.Error != nil {
			r.scr.Line("tandem run: the run failed: %s: %s", rc.Error.Code, rc.Error.Message)
		} else {
			r.scr.Line("tandem run: the run failed")
		}
		return exitError, nil
	default:
		r.scr.Line("tandem run: the run ended %s", rc.Outcome)
		return exitError, nil
	}
}

// pickSession is the session to prompt: --session, else the last one unless
// --new, else a new one.
func (r *runner) pickSession(ctx context.Context) (string, error) {
	c, ws := r.b.c, r.ws
	var current *proto.Session
	switch {
	case r.o.session != "":
		s, err := c.GetSession(ctx, ws.ID, r.o.session)
		if client.IsNotFound(err) {
			return "", fmt.Errorf("no session %s in the workspace of %s (see tandem sessions)", r.o.session, ws.Path)
		}
		if err != nil {
			return "", fmt.Errorf("get session %s: %w", r.o.session, explain(err))
		}
		current = &s
	case !r.o.newSession:
		id, ok, err := c.LastSession(ctx, ws.ID)
		if err != nil {
			return "", fmt.Errorf("find the last session: %w", explain(err))
		}
		if ok {
			s, err := c.GetSession(ctx, ws.ID, id)
			if err != nil {
				return "", fmt.Errorf("get session %s: %w", id, explain(err))
			}
			current = &s
		}
	}
	if current == nil && r.o.compact {
		return "", fmt.Errorf("no session to compact in the workspace of %s", ws.Path)
	}
	if current == nil {
		s, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Model: r.o.model})
		if err != nil {
			return "", fmt.Errorf("create session: %w", explain(err))
		}
		if !r.o.json {
			r.scr.Line("tandem: new session %s (%s)", s.ID, s.Model)
		}
		return s.ID, nil
	}
	if r.o.model != "" && r.o.model != current.Model {
		if _, err := c.SetModel(ctx, ws.ID, current.ID, proto.SetModelRequest{Model: r.o.model}); err != nil {
			return "", fmt.Errorf("switch session %s to %s: %w", current.ID, r.o.model, explain(err))
		}
	}
	if r.env.stderrTTY && !r.o.json {
		r.scr.Line("tandem: session %s, %q (%d messages)", current.ID, current.Title, current.MessageCount)
	}
	return current.ID, nil
}

// post sends the prompt. It holds r.mu meanwhile (see runner.mu), and does
// not give up on a Ctrl-C: a prompt the server may have accepted must end
// in a known run id, so that it can be canceled.
func (r *runner) post(ctx context.Context) (proto.PromptAccepted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prompting.Store(true)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	var acc proto.PromptAccepted
	var err error
	switch {
	case r.o.compact:
		if acc, err = r.b.c.Compact(pctx, r.ws.ID, r.sessionID); err != nil {
			return acc, fmt.Errorf("compact: %w", explain(err))
		}
	default:
		req := proto.PromptRequest{SessionID: r.sessionID, Prompt: r.o.prompt}
		if r.o.steer {
			req.Delivery = proto.DeliverySteer
		}
		if acc, err = r.b.c.Prompt(pctx, r.ws.ID, req); err != nil {
			return acc, fmt.Errorf("send prompt: %w", explain(err))
		}
	}
	r.runID = acc.RunID
	return acc, nil
}

// wait follows the run until its run.completed. After a stream.reset the
// completion may have been skipped, so the run's fate is read over REST.
func (r *runner) wait(ctx context.Context, b *backend, stream *client.EventStream) (proto.RunCompleted, error) {
	for {
		rc, err := client.WaitRunFunc(ctx, stream, r.runID, r.handle)
		if !errors.Is(err, client.ErrStreamReset) {
			return rc, err
		}
		rc, done, err := r.completedFromHistory(ctx, b)
		if err != nil || done {
			return rc, err
		}
	}
}

// completedFromHistory tells whether the run is over, and how, from the
// agent's status and the session's messages.
func (r *runner) completedFromHistory(ctx context.Context, b *backend) (proto.RunCompleted, bool, error) {
	st, err := b.c.AgentStatus(ctx, r.ws.ID, r.sessionID)
	if err != nil {
		return proto.RunCompleted{}, false, fmt.Errorf("agent status after a stream reset: %w", explain(err))
	}
	if st.ActiveRunID != nil && *st.ActiveRunID == r.runID {
		return proto.RunCompleted{}, false, nil
	}
	for _, q := range st.Queued {
		if q.RunID == r.runID {
			return proto.RunCompleted{}, false, nil
		}
	}
	msgs, err := b.c.Messages(ctx, r.ws.ID, r.sessionID)
	if err != nil {
		return proto.RunCompleted{}, false, fmt.Errorf("messages after a stream reset: %w", explain(err))
	}
	rc := proto.RunCompleted{RunID: r.runID, Outcome: proto.OutcomeError,
		Error: &proto.ErrorDetail{Code: "unknown", Message: "the run's end was lost in a stream reset"}}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.RunID != r.runID || m.Role != proto.RoleAssistant || len(m.Parts) == 0 {
			continue
		}
		if last := m.Parts[len(m.Parts)-1]; last.Type == proto.PartFinish {
			rc.Outcome, rc.MessageID, rc.Error = last.Reason, m.ID, nil
			if last.Reason == proto.FinishError {
				rc.Error = &proto.ErrorDetail{Code: proto.OutcomeError, Message: last.Message}
			}
		}
		break
	}
	return rc, true, nil
}

// handle shows one event of the session's stream. Events of other runs of
// the session (another client's, queued before ours) are not ours to show
// or answer.
func (r *runner) handle(ev proto.Event) {
	if r.o.json && ev.Seq > 0 {
		line, err := json.Marshal(ev)
		if err == nil {
			r.scr.Text(string(line) + "\n")
		}
	}
	switch ev.Type {
	case proto.EventPermissionResolved:
		r.permissionResolved(ev)
		return
	case proto.EventWorkspaceClosing:
		if d, err := client.DecodeData[proto.WorkspaceClosing](ev); err == nil {
			r.scr.Line("tandem: the server is closing the workspace (%s)", d.Reason)
		}
		return
	case proto.EventStreamEvicted:
		r.scr.Line("tandem: the server dropped the stream for being slow; reconnecting")
		return
	case proto.EventMCPServerStatus:
		// A server that cannot run is worth saying: its tools are gone.
		if d, err := client.DecodeData[proto.MCPServerStatus](ev); err == nil && d.Status == proto.MCPFailed && !r.o.json {
			r.scr.Line("[mcp] server %s failed: %s", d.Name, shorten(d.Error))
		}
		return
	}
	if ev.RunID != r.runID {
		return
	}
	switch ev.Type {
	case proto.EventSessionLog:
		// The server's warnings about our run (a model request retried,
		// say): the wait they explain would look like a hang otherwise.
		if d, err := client.DecodeData[proto.SessionLog](ev); err == nil && d.Level != "info" && !r.o.json {
			r.scr.Line("[%s] %s", d.Level, shorten(d.Message))
		}
	case proto.EventSessionCompactionStarted:
		r.scr.Status("compacting the conversation…")
	case proto.EventSessionCompactionCompleted:
		if d, err := client.DecodeData[proto.CompactionCompleted](ev); err == nil && !r.o.json {
			r.scr.Line("[compaction] the conversation was summarized: %s -> %s tokens", count(d.TokensBefore), count(d.TokensAfter))
		}
		r.scr.Status("thinking…")
	case proto.EventRunStarted:
		r.scr.Status("thinking…")
	case proto.EventMessageDelta:
		d, err := client.DecodeData[proto.MessageDelta](ev)
		if err != nil || r.o.json {
			return
		}
		if d.Kind != "text" {
			r.scr.Status("reasoning…")
			return
		}
		if d.MessageID != r.lastMessage {
			r.scr.EndText()
			r.lastMessage = d.MessageID
		}
		r.scr.Text(d.Text)
	case proto.EventToolStarted:
		d, err := client.DecodeData[proto.ToolStarted](ev)
		if err != nil {
			return
		}
		if !r.o.json {
			r.scr.Line("[tool] %s %s", d.Name, shorten(string(d.Arguments)))
		}
		r.scr.Status("running " + d.Name + "…")
	case proto.EventToolFinished:
		d, err := client.DecodeData[proto.ToolFinished](ev)
		if err != nil {
			return
		}
		if !r.o.json {
			if d.Permission != "" {
				// A rule of the configuration decided it, not a person.
				r.scr.Line("[rule] %s: %s", d.Name, d.Permission)
			}
			verb := "done"
			if d.IsError {
				verb = "failed"
			}
			r.scr.Line("[tool] %s %s: %s", d.Name, verb, shorten(d.Content))
		}
		r.scr.Status("thinking…")
	case proto.EventToolRequested:
		if d, err := client.DecodeData[proto.ToolCallRequest](ev); err == nil {
			r.scr.Status("waiting for a client to run " + d.ToolName + "…")
		}
	case proto.EventPermissionRequested:
		req, err := client.DecodeData[proto.PermissionRequest](ev)
		if err != nil {
			r.scr.Line("tandem run: unreadable permission request: %v", err)
			return
		}
		r.permissionRequested(req)
	}
}

// permissionRequested answers a permission request of our run: --yes
// approves, nobody at a terminal means nobody to ask, otherwise the asker
// asks.
func (r *runner) permissionRequested(req proto.PermissionRequest) {
	r.perms[req.RequestID] = req.ToolName + ": " + req.Summary
	switch {
	case r.o.yes:
		r.answer(req, proto.DecisionApproveOnce, "")
	case r.ask == nil:
		r.scr.Line("[permission] %s: %s: no terminal to ask on, refusing (--yes approves)", req.ToolName, req.Summary)
		r.answer(req, proto.DecisionUserNotAvailable, "")
	default:
		r.scr.Status("")
		r.ask.enqueue(req)
	}
}

func (r *runner) permissionResolved(ev proto.Event) {
	d, err := client.DecodeData[proto.PermissionResolved](ev)
	if err != nil {
		return
	}
	what, ours := r.perms[d.RequestID]
	if !ours {
		return
	}
	delete(r.perms, d.RequestID)
	if r.ask != nil {
		r.ask.resolved(d.RequestID)
	}
	if !r.o.json {
		if d.ResolvedByName != "" && d.ResolvedBy != r.b.c.ClientID() {
			// Answered by someone else: say who.
			r.scr.Line("[permission] %s: %s by %s", what, d.Result, d.ResolvedByName)
			return
		}
		r.scr.Line("[permission] %s: %s", what, d.Result)
	}
}

// answer sends a decision. A request another client answered first is
// already_resolved, which is no error for us.
func (r *runner) answer(req proto.PermissionRequest, decision, feedback string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, err := r.b.c.AnswerPermission(ctx, r.ws.ID, req.RequestID, proto.PermissionAnswer{Decision: decision, Feedback: feedback})
	if err != nil && !client.IsCode(err, proto.CodeAlreadyResolved) {
		r.scr.Line("tandem run: answer permission %s: %v", req.RequestID, explain(err))
	}
}

// formatUsage says what a run's model requests used, and cost when known.
func formatUsage(u proto.Usage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s tokens in", count(u.InputTokens))
	if u.CacheReadTokens > 0 {
		fmt.Fprintf(&b, " (%s cached)", count(u.CacheReadTokens))
	}
	fmt.Fprintf(&b, ", %s out", count(u.OutputTokens))
	if u.ReasoningTokens > 0 {
		fmt.Fprintf(&b, " (%s reasoning)", count(u.ReasoningTokens))
	}
	if u.CostUSD != nil {
		fmt.Fprintf(&b, ", %s", cost(*u.CostUSD))
	}
	return b.String()
}

// count writes a token count for people: 950, 12.3k, 1.2M.
func count(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 999_950: // not "1000.0k"
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e3)) + "k"
	default:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/1e6)) + "M"
	}
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

// cost writes US dollars with the precision small amounts need; a model
// priced at nothing (the echo model) is "free", not "$0.0000".
func cost(usd float64) string {
	if usd == 0 {
		return "free"
	}
	if usd < 0.01 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// shorten makes s one line of at most maxShown runes, for a hint on stderr.
func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxShown {
		return string(r[:maxShown-1]) + "…"
	}
	return s
}
