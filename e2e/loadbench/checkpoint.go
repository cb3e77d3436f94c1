package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The checkpoint phase: what a checkpoint costs a run that changes files
// (issue 35, target 4), on a server of its own and a fake model of its
// own that calls tools. In a workspace of n files (checkpointSizes), runs
// one after the other whose model calls one tool and then answers:
//
//   - reading runs call view on a file: no checkpoint is taken;
//   - file-changing runs call write on a file: the run takes a checkpoint
//     before the call and one when it ends.
//
// Each is timed from its POST to its run.completed, in alternating
// blocks so that both see the same machine. The difference, halved, is
// what one checkpoint costs (the server does not report it). Target: a
// file-changing run at most 10% more than a reading one.
var checkpointSizes = []int{1000, 10000}

// checkpointRuns is how many runs of each kind the phase times per size,
// in checkpointBlocks alternating blocks.
var checkpointRuns = map[int]int{1000: 60, 10000: 20}

const checkpointBlocks = 4

var checkpointPhase = ownPhase{
	name: "checkpoint",
	run:  runCheckpoint,
	metrics: func(cfg config) []metric {
		var ms []metric
		for _, n := range checkpointSizes {
			k := sizeKey(n)
			ms = append(ms,
				metric{"ckpt-read-" + k, fmt.Sprintf("reading run (view), %d files", n), "ms"},
				metric{"ckpt-write-" + k, fmt.Sprintf("file-changing run (write), %d files", n), "ms"},
				metric{"ckpt-extra-" + k, fmt.Sprintf("file-changing run's time over a reading one's, %d files (target ≤ 10)", n), "%"},
				metric{"ckpt-one-" + k, fmt.Sprintf("one checkpoint, derived: (write-read)/2, %d files", n), "ms"},
			)
		}
		return ms
	},
}

func sizeKey(n int) string { return fmt.Sprintf("%dk", n/1000) }

func runCheckpoint(cfg config, bin, _ string, res result) error {
	model := httptest.NewServer(http.HandlerFunc(serveToolModel))
	defer model.Close()
	b, end, err := startBench(cfg, bin, model.URL, res)
	if err != nil {
		return err
	}
	defer end()
	for _, n := range checkpointSizes {
		if err := b.checkpointSize(n); err != nil {
			return err
		}
	}
	return nil
}

// checkpointSize measures the runs in a workspace of n files.
func (b *bench) checkpointSize(n int) error {
	dir, err := os.MkdirTemp("", "loadbench-ckpt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "checkpoint: making %d files\n", n)
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("pkg%03d", i/500), fmt.Sprintf("sub%d", (i/50)%10), fmt.Sprintf("file%05d.go", i))
		if i%50 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "package p\n\n// file %d\nfunc F%d() int { return %d }\n", i, i, i), 0o644); err != nil {
			return err
		}
	}
	ws, err := b.c.workspace(dir)
	if err != nil {
		return err
	}
	runs, unfollow, err := followRuns(b.c, ws)
	if err != nil {
		return err
	}
	defer unfollow()
	var s struct {
		ID string `json:"id"`
	}
	if err := b.c.post("/v1/workspaces/"+ws+"/sessions", map[string]any{"permission_mode": "allow_all"}, &s, http.StatusCreated); err != nil {
		return err
	}
	seq := 0
	run := func(write bool) (time.Duration, error) {
		seq++
		prompt := "view pkg000/sub0/file00000.go"
		if write {
			prompt = fmt.Sprintf("write pkg000/sub0/file00000.go %d", seq)
		}
		start := time.Now()
		id, err := b.c.prompt(ws, s.ID, prompt)
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		_, done, err := runs.wait(ctx, id)
		if err != nil {
			return 0, err
		}
		// A write that failed would time a run that changed nothing.
		if write {
			got, err := os.ReadFile(filepath.Join(dir, "pkg000", "sub0", "file00000.go"))
			if want := fmt.Sprintf("%d\n", seq); err != nil || string(got) != want {
				return 0, fmt.Errorf("run %s: the file holds %q (%v), not %q: the write did not happen", id, got, err, want)
			}
		}
		return done.Sub(start), nil
	}
	// The first checkpoint stores every file; then a few of each, warm.
	for i := range 6 {
		if _, err := run(i%2 == 0); err != nil {
			return err
		}
	}
	total := checkpointRuns[n]
	fmt.Fprintf(os.Stderr, "checkpoint: %d reading and %d file-changing runs, %d files\n", total, total, n)
	var read, write time.Duration
	for blk := range checkpointBlocks {
		for _, w := range []bool{blk%2 == 1, blk%2 == 0} {
			for range total / checkpointBlocks {
				d, err := run(w)
				if err != nil {
					return err
				}
				if w {
					write += d
				} else {
					read += d
				}
			}
		}
	}
	k := sizeKey(n)
	per := float64(total / checkpointBlocks * checkpointBlocks)
	r := float64(read.Microseconds()) / 1000 / per
	w := float64(write.Microseconds()) / 1000 / per
	b.res["ckpt-read-"+k] = r
	b.res["ckpt-write-"+k] = w
	b.res["ckpt-extra-"+k] = (w/r - 1) * 100
	b.res["ckpt-one-"+k] = (w - r) / 2
	return nil
}

// serveToolModel is the checkpoint phase's fake model: to a prompt
//
//	view PATH       it calls view on PATH,
//	write PATH TAG  it calls write on PATH with content "TAG\n",
//
// and once the tool's result is in, it answers a word; any other request
// it leaves to serveModel.
func serveToolModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prompt, afterTool, err := lastPrompt(bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var tool string
	var args map[string]string
	switch f := strings.Fields(prompt); {
	case afterTool:
	case len(f) == 2 && f[0] == "view":
		tool, args = "view", map[string]string{"path": f[1]}
	case len(f) == 3 && f[0] == "write":
		tool, args = "write", map[string]string{"path": f[1], "content": f[2] + "\n"}
	}
	if tool == "" {
		r.Body = io.NopCloser(bytes.NewReader(body))
		serveModel(w, r)
		return
	}
	a, _ := json.Marshal(args)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, toolCall(tool, string(a)))
}
