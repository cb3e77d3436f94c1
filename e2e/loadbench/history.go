package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/tandem-dev/tandem/proto"
)

// The history phase: what a long session costs against a short one, on a
// server of its own. Sessions are imported (POST .../sessions/import) with
// a history of earlier turns, as a user's long session would have: a
// prompt, and an answer of a few hundred bytes.
//
//   - server CPU per run (one model step) in a session of shortHistory
//     messages and in one of longHistory, run one after the other;
//   - prompt accept with 16 posters, each on a session of ~200 runs.
const (
	shortHistory = 10
	longHistory  = 1000
)

var historyPhase = ownPhase{
	name: "history",
	run:  runHistory,
	metrics: func(cfg config) []metric {
		return []metric{
			{"step-cpu-short", fmt.Sprintf("server CPU per run, %d messages of history", shortHistory), "ms"},
			{"step-cpu-long", fmt.Sprintf("server CPU per run, %d messages of history", longHistory), "ms"},
			{"step-cpu-ratio", "ratio long/short (target ≤ 1.5)", "×"},
			{"accept-long-p50", fmt.Sprintf("prompt accept p50, 16 posters on %d-message sessions", cfg.postersHistory), "ns"},
			{"accept-long-p99", fmt.Sprintf("prompt accept p99, 16 posters on %d-message sessions", cfg.postersHistory), "ns"},
			{"health-long-p99", "control: GET /v1/health p99, same load", "ns"},
		}
	},
}

func runHistory(cfg config, bin, modelURL string, res result) error {
	b, end, err := startBench(cfg, bin, modelURL, res)
	if err != nil {
		return err
	}
	defer end()
	c, ws := b.c, b.ws

	short, err := c.importSession(ws, shortHistory)
	if err != nil {
		return err
	}
	long, err := c.importSession(ws, longHistory)
	if err != nil {
		return err
	}
	// Warm both (the first run of a session loads its history), then
	// measure each, then the ratio.
	for _, sid := range []string{short, long} {
		if _, err := b.sequential(sid, 5); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "history: %d runs, %d messages\n", cfg.historyRuns, shortHistory)
	cpuShort, err := b.sequential(short, cfg.historyRuns)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "history: %d runs, %d messages\n", cfg.historyRuns, longHistory)
	cpuLong, err := b.sequential(long, cfg.historyRuns)
	if err != nil {
		return err
	}
	res["step-cpu-short"] = cpuShort
	res["step-cpu-long"] = cpuLong
	res["step-cpu-ratio"] = cpuLong / cpuShort

	fmt.Fprintf(os.Stderr, "history: 16 posters, %d messages each\n", cfg.postersHistory)
	sessions := make([]string, 16)
	for i := range sessions {
		if sessions[i], err = c.importSession(ws, cfg.postersHistory); err != nil {
			return err
		}
	}
	// Sessions in use, as a user's are: their histories read and encoded
	// once (what a first run after a restart pays is not this measure's).
	for _, sid := range sessions {
		if _, err := b.sequential(sid, 1); err != nil {
			return err
		}
	}
	l, err := b.load(sessions, cfg.runs, cfg.think)
	if err != nil {
		return err
	}
	res["accept-long-p50"] = float64(l.accept.Quantile(0.50))
	res["accept-long-p99"] = float64(l.accept.Quantile(0.99))
	res["health-long-p99"] = float64(l.health.Quantile(0.99))
	return nil
}

// sequential runs n fast runs one after the other in session sid and
// returns the server's CPU per run, in ms.
func (b *bench) sequential(sid string, n int) (float64, error) {
	cpu := b.srv.cpu()
	for i := range n {
		id, err := b.c.prompt(b.ws, sid, fmt.Sprintf("fast %d", i))
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		_, _, err = b.runs.wait(ctx, id)
		cancel()
		if err != nil {
			return 0, err
		}
	}
	return float64((b.srv.cpu() - cpu).Microseconds()) / 1000 / float64(n), nil
}

// importSession imports a session with a history of n messages (turns of
// a prompt and its answer) and returns its id.
func (c *client) importSession(ws string, n int) (string, error) {
	// Each answer its own text, as in a real session.
	answer := func(i int) string {
		return fmt.Sprintf("Turn %d: ", i) + strings.Repeat("Changed the parser to keep the last token, ran the tests: all pass. ", 6)
	}
	now := proto.Now()
	doc := proto.Export{Format: "tandem.session.v1", Session: proto.Session{ID: uuid.NewString()}}
	for i := range n {
		m := proto.Message{ID: uuid.NewString(), CreatedAt: now, UpdatedAt: now}
		if i%2 == 0 {
			m.Role = proto.RoleUser
			m.Parts = []proto.Part{{Type: proto.PartText, Text: fmt.Sprintf("earlier prompt %d: make the tests pass and explain what you changed", i/2)}}
		} else {
			m.Role = proto.RoleAssistant
			m.Parts = []proto.Part{{Type: proto.PartText, Text: answer(i)}, {Type: proto.PartFinish, Reason: proto.FinishEndTurn}}
		}
		doc.Messages = append(doc.Messages, m)
	}
	var s proto.Session
	return s.ID, c.post("/v1/workspaces/"+ws+"/sessions/import", doc, &s, http.StatusCreated)
}
