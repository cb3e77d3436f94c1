package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/tandem-dev/tandem/proto"
)

// asker asks the person at the terminal about permission requests, one at a
// time and in order, away from the event loop: the loop must go on reading
// (another client may answer first, the run may be canceled) while the
// question waits for a line.
type asker struct {
	r     *runner
	lines <-chan string // stdin's lines; closed at EOF
	wake  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	queue   []proto.PermissionRequest
	settled map[string]bool // resolved before or while being asked
	current string
	gone    chan struct{} // closed when current is resolved elsewhere
}

func newAsker(r *runner, stdin io.Reader) *asker {
	a := &asker{r: r, wake: make(chan struct{}, 1), done: make(chan struct{}), settled: map[string]bool{}}
	a.lines = readLines(stdin, a.done)
	return a
}

// readLines feeds stdin's lines to a channel until EOF or stop. The
// goroutine may stay blocked on a read of a terminal nobody types in; that
// is the price of a read that cannot be interrupted, and the process ends
// soon after anyway.
func readLines(r io.Reader, stop <-chan struct{}) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case ch <- sc.Text():
			case <-stop:
				return
			}
		}
	}()
	return ch
}

func (a *asker) enqueue(req proto.PermissionRequest) {
	a.mu.Lock()
	a.queue = append(a.queue, req)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// resolved tells the asker a request was settled (by anybody, us included),
// so it neither asks it nor keeps waiting for its answer.
func (a *asker) resolved(requestID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settled[requestID] = true
	if a.current == requestID && a.gone != nil {
		close(a.gone)
		a.gone = nil
	}
}

// next waits for the next request not settled yet, and makes it current.
func (a *asker) next(ctx context.Context) (proto.PermissionRequest, chan struct{}, bool) {
	for {
		a.mu.Lock()
		for len(a.queue) > 0 {
			req := a.queue[0]
			a.queue = a.queue[1:]
			if a.settled[req.RequestID] {
				continue
			}
			a.current, a.gone = req.RequestID, make(chan struct{})
			gone := a.gone
			a.mu.Unlock()
			return req, gone, true
		}
		a.current, a.gone = "", nil
		a.mu.Unlock()
		select {
		case <-a.wake:
		case <-ctx.Done():
			return proto.PermissionRequest{}, nil, false
		}
	}
}

// loop asks until ctx ends. Done is closed when it has returned, so the
// command can wait for an answer in flight before it stops a server.
func (a *asker) loop(ctx context.Context) {
	defer close(a.done)
	for {
		req, gone, ok := a.next(ctx)
		if !ok {
			return
		}
		decision, feedback, ok := a.question(ctx, req, gone)
		if !ok {
			continue
		}
		a.r.answer(req, decision, feedback)
	}
}

// question asks about req until it gets an answer; ok is false when there is
// none to send (settled elsewhere, or the command is ending).
func (a *asker) question(ctx context.Context, req proto.PermissionRequest, gone <-chan struct{}) (decision, feedback string, ok bool) {
	scr := a.r.scr
	scr.Line("[permission] %s wants to: %s", req.ToolName, req.Summary)
	for _, l := range detailLines(req.Details) {
		scr.Line("    %s", l)
	}
	for {
		scr.Ask("allow? [y]es, [a]lways in this session, [n]o, or type what to do instead: ")
		select {
		case line, open := <-a.lines:
			if !open {
				scr.Line("")
				return proto.DecisionUserNotAvailable, "", true
			}
			decision, feedback, ok := parseDecision(line)
			if ok {
				return decision, feedback, true
			}
		case <-gone:
			scr.Line("")
			return "", "", false
		case <-ctx.Done():
			scr.Line("")
			return "", "", false
		}
	}
}

// parseDecision reads an answer to a permission question: y(es), a(lways),
// n(o), or any other text, which refuses and tells the model why. An empty
// line is no answer.
func parseDecision(line string) (decision, feedback string, ok bool) {
	text := strings.TrimSpace(line)
	switch strings.ToLower(text) {
	case "":
		return "", "", false
	case "y", "yes":
		return proto.DecisionApproveOnce, "", true
	case "a", "always":
		return proto.DecisionApproveSession, "", true
	case "n", "no":
		return proto.DecisionReject, "", true
	}
	return proto.DecisionReject, text, true
}

// longDetails is the number of detail lines past which a summary of the diff
// is repeated next to the question, as the diff's start has scrolled away.
const longDetails = 40

// detailLines renders a permission's details for the question: a diff or a
// command as they are, other fields as key: value. Nothing is cut: the
// person approving must see every line a change adds or removes, however
// long (the server already bounds a diff to what one event can carry, and
// says so in it when it had to cut).
func detailLines(details map[string]any) []string {
	var lines []string
	for _, key := range []string{"command", "diff"} {
		if s, ok := details[key].(string); ok && s != "" {
			lines = append(lines, strings.Split(strings.TrimRight(s, "\n"), "\n")...)
		}
	}
	if d, ok := details["diff"].(string); ok && len(lines) > longDetails {
		// The question follows a long diff: say what scrolled by.
		var added, removed int
		for _, l := range strings.Split(d, "\n") {
			switch {
			case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
			case strings.HasPrefix(l, "+"):
				added++
			case strings.HasPrefix(l, "-"):
				removed++
			}
		}
		lines = append(lines, fmt.Sprintf("(the diff above is %d lines: %d added, %d removed; scroll up to read all of it)", len(lines), added, removed))
	}
	if len(lines) == 0 {
		keys := make([]string, 0, len(details))
		for k := range details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lines = append(lines, fmt.Sprintf("%s: %v", k, details[k]))
		}
	}
	return lines
}
