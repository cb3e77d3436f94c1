package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// Options say what Run shows and where it connects.
type Options struct {
	Client *client.Client
	// Dir is the workspace's directory (the current one).
	Dir string
	// SessionID opens that session; NewSession a new one; else the last.
	SessionID  string
	NewSession bool
	// Model is the model of a new session, or the one an existing session
	// is switched to.
	Model   string
	Hosting bool
	Note    string
	// Input and Output replace the terminal (nil: stdin and stdout).
	Input  io.Reader
	Output io.Writer
}

// Run shows the TUI until the user quits or ctx ends. One goroutine it owns
// connects (retrying while the server is down), opens the workspace and
// the session, then feeds the event stream to the program; it is stopped
// and waited for before Run returns.
func Run(ctx context.Context, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := Config{API: o.Client, Hosting: o.Hosting, Note: o.Note}
	if root, err := os.OpenRoot(o.Dir); err == nil {
		defer root.Close()
		cfg.Files = root.FS()
	}
	opts := []tea.ProgramOption{tea.WithContext(ctx)}
	if o.Input != nil {
		opts = append(opts, tea.WithInput(o.Input))
	}
	if o.Output != nil {
		opts = append(opts, tea.WithOutput(o.Output))
	}
	p := tea.NewProgram(New(cfg), opts...)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		feed(ctx, o, p.Send)
	}()
	final, err := p.Run()
	cancel()
	wg.Wait()
	if fm, ok := final.(Model); ok && fm.fatal != nil {
		return fm.fatal
	}
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// feed connects and passes the stream's events to send until ctx ends.
func feed(ctx context.Context, o Options, send func(tea.Msg)) {
	c := o.Client
	var (
		ws     proto.Workspace
		sess   proto.Session
		stream *client.EventStream
	)
	for attempt := 1; ; attempt++ {
		var err error
		ws, sess, stream, err = open(ctx, o, send)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 && apiErr.Status != 429 {
			// A wrong token or an unknown session: waiting fixes nothing.
			send(fatalMsg{err: err})
			return
		}
		send(ConnMsg{State: "connecting…", Err: err})
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*250*time.Millisecond, 3*time.Second)):
		}
	}
	defer stream.Close()
	defer c.CloseIdleConnections()
	send(ReadyMsg{Workspace: ws, Session: sess})
	for {
		ev, err := stream.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				send(ConnMsg{State: "disconnected", Err: err})
			}
			return
		}
		send(EventMsg{Event: ev})
	}
}

// open opens the workspace, picks the session and opens the stream.
func open(ctx context.Context, o Options, send func(tea.Msg)) (proto.Workspace, proto.Session, *client.EventStream, error) {
	c := o.Client
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	ws, _, err := c.CreateWorkspace(cctx, o.Dir)
	if err != nil {
		return ws, proto.Session{}, nil, fmt.Errorf("open workspace %s: %w", o.Dir, err)
	}
	var sess proto.Session
	switch {
	case o.SessionID != "":
		sess, err = c.GetSession(cctx, ws.ID, o.SessionID)
	case !o.NewSession:
		var id string
		var ok bool
		id, ok, err = c.LastSession(cctx, ws.ID)
		if err == nil && ok {
			sess, err = c.GetSession(cctx, ws.ID, id)
		}
	}
	if err != nil {
		return ws, sess, nil, fmt.Errorf("session: %w", err)
	}
	if sess.ID == "" {
		if sess, err = c.CreateSession(cctx, ws.ID, proto.CreateSessionRequest{Model: o.Model}); err != nil {
			return ws, sess, nil, fmt.Errorf("create session: %w", err)
		}
	} else if o.Model != "" && o.Model != sess.Model {
		if sess, err = c.SetModel(cctx, ws.ID, sess.ID, proto.SetModelRequest{Model: o.Model}); err != nil {
			return ws, sess, nil, fmt.Errorf("switch to %s: %w", o.Model, err)
		}
	}
	// The whole workspace's stream: switching sessions needs no new one.
	stream, err := c.Events(ctx, ws.ID, client.EventsOptions{
		OnDisconnect: func(err error) { send(ConnMsg{State: "reconnecting…", Err: err}) },
	})
	if err != nil {
		return ws, sess, nil, fmt.Errorf("event stream: %w", err)
	}
	return ws, sess, stream, nil
}
