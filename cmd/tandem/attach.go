package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/proto"
)

// attachOptions are the flags of tandem attach.
type attachOptions struct {
	clientOptions
	workspace string
	session   string
}

func parseAttach(args []string, env *cliEnv) (attachOptions, error) {
	var o attachOptions
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: tandem attach [flags]

Prints the live events of the current directory's workspace (or --workspace),
one line per event, or with --json the server's envelopes, one per line,
until Ctrl-C.

flags:
`)
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "print the server's event envelopes, one JSON object per line")
	fs.StringVar(&o.workspace, "workspace", "", "workspace ID (default: the current directory's)")
	fs.StringVar(&o.session, "session", "", "only this session's events (and the workspace's own)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return o, err
	}
	if len(rest) > 0 {
		return o, fmt.Errorf("unexpected argument %q", rest[0])
	}
	return o, nil
}

// attachCommand is tandem attach.
func attachCommand(args []string, env *cliEnv) int {
	o, err := parseAttach(args, env)
	if err != nil {
		return usageError(env, "attach", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs, stopSignals := env.signals()
	defer stopSignals()
	go func() {
		select {
		case <-sigs:
			stop()
		case <-ctx.Done():
		}
	}()
	if err := attach(ctx, o, env); err != nil {
		if ctx.Err() != nil {
			// Ctrl-C is how attach is meant to end.
			return exitOK
		}
		return fail(env, "attach", err)
	}
	return exitOK
}

func attach(ctx context.Context, o attachOptions, env *cliEnv) error {
	// No in-process server: nobody else could be watched on it.
	b, err := o.connect(ctx, env, false)
	if err != nil {
		return err
	}
	defer b.Close()
	var ws proto.Workspace
	if o.workspace != "" {
		ws, err = b.c.GetWorkspace(ctx, o.workspace)
		if client.IsNotFound(err) {
			return fmt.Errorf("no workspace %s (see tandem workspaces)", o.workspace)
		}
		if err != nil {
			return fmt.Errorf("get workspace %s: %w", o.workspace, explain(err))
		}
	} else {
		dir, err := currentDir(env)
		if err != nil {
			return err
		}
		if ws, _, err = b.c.CreateWorkspace(ctx, dir); err != nil {
			return fmt.Errorf("open workspace %s: %w", dir, explain(err))
		}
	}
	stream, err := b.c.Events(ctx, ws.ID, client.EventsOptions{SessionID: o.session})
	if err != nil {
		return fmt.Errorf("open event stream: %w", explain(err))
	}
	defer stream.Close()
	p := &eventPrinter{w: env.stdout}
	defer p.end()
	opened := false
	for {
		ev, err := stream.Next(ctx)
		if err != nil {
			if errors.Is(err, client.ErrWorkspaceDeleted) {
				p.end()
				fmt.Fprintln(env.stderr, "tandem: the workspace was deleted")
				return nil
			}
			return fmt.Errorf("event stream: %w", explain(err))
		}
		if ev.Seq == 0 {
			// Control frames are about this connection, not the
			// workspace: notes on stderr, never in the JSON output.
			p.end()
			note(env.stderr, ev, ws, &opened)
			continue
		}
		if o.json {
			line, err := json.Marshal(ev)
			if err != nil {
				return fmt.Errorf("encode event %d: %w", ev.Seq, err)
			}
			if _, err := fmt.Fprintf(env.stdout, "%s\n", line); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			continue
		}
		if err := p.print(ev); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// note tells about a control frame on stderr.
func note(w io.Writer, ev proto.Event, ws proto.Workspace, opened *bool) {
	switch ev.Type {
	case proto.EventStreamOpened:
		if !*opened {
			*opened = true
			fmt.Fprintf(w, "tandem: attached to workspace %s (%s); Ctrl-C to stop\n", ws.ID, ws.Path)
		} else {
			fmt.Fprintln(w, "tandem: reconnected")
		}
	case proto.EventStreamReset:
		fmt.Fprintln(w, "tandem: the server could not replay what was missed while disconnected; some events are lost")
	case proto.EventStreamEvicted:
		fmt.Fprintln(w, "tandem: the server dropped the stream for being slow; reconnecting")
	}
}

// eventPrinter writes events one per line, except deltas: those of one
// message part are appended to one line, as the text appears.
type eventPrinter struct {
	w io.Writer
	// delta is the message part whose deltas the current line holds, "" when
	// the last line is complete.
	delta string
}

func (p *eventPrinter) end() {
	if p.delta != "" {
		fmt.Fprintln(p.w)
		p.delta = ""
	}
}

func (p *eventPrinter) print(ev proto.Event) error {
	head := fmt.Sprintf("%s %6d %-22s %-8s", ev.Time.Local().Format("15:04:05.000"), ev.Seq, ev.Type, short(ev.SessionID))
	if ev.Type == proto.EventMessageDelta {
		d, err := client.DecodeData[proto.MessageDelta](ev)
		if err == nil {
			key := fmt.Sprintf("%s/%d/%s", d.MessageID, d.PartIndex, d.Kind)
			if key != p.delta {
				p.end()
				p.delta = key
				if _, err := fmt.Fprintf(p.w, "%s %s: ", head, d.Kind); err != nil {
					return err
				}
			}
			_, err := io.WriteString(p.w, d.Text)
			return err
		}
	}
	p.end()
	line := summarize(ev)
	if ev.Actor != nil && ev.Actor.Name != "" && ev.Type != proto.EventClientAttached && ev.Type != proto.EventClientDetached {
		line += " (by " + ev.Actor.Name + ")"
	}
	_, err := fmt.Fprintf(p.w, "%s %s\n", head, line)
	return err
}

// short is the first 8 characters of an id: enough to tell sessions apart on
// a screen.
func short(id string) string {
	if id == "" {
		return "-"
	}
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// summarize is the one-line gist of an event's data.
func summarize(ev proto.Event) string {
	switch ev.Type {
	case proto.EventSessionCreated, proto.EventSessionUpdated:
		if s, err := client.DecodeData[proto.Session](ev); err == nil {
			return fmt.Sprintf("%q %s, %d messages", s.Title, s.Model, s.MessageCount)
		}
	case proto.EventSessionDeleted:
		if d, err := client.DecodeData[proto.SessionDeleted](ev); err == nil {
			return d.SessionID
		}
	case proto.EventSessionStarted:
		if d, err := client.DecodeData[proto.SessionStarted](ev); err == nil {
			return fmt.Sprintf("model %s in %s", d.Model, d.Context.Cwd)
		}
	case proto.EventSessionResumed:
		if d, err := client.DecodeData[proto.SessionResumed](ev); err == nil {
			return fmt.Sprintf("by client %s (continue pending work: %t)", short(d.ClientID), d.ContinuePendingWork)
		}
	case proto.EventSessionModelChanged:
		if d, err := client.DecodeData[proto.SessionModelChanged](ev); err == nil {
			return fmt.Sprintf("%s -> %s", d.PreviousModel, d.Model)
		}
	case proto.EventSessionLog:
		if d, err := client.DecodeData[proto.SessionLog](ev); err == nil {
			return fmt.Sprintf("[%s] %s", d.Level, shorten(d.Message))
		}
	case proto.EventRunAccepted:
		if d, err := client.DecodeData[proto.RunAccepted](ev); err == nil {
			return fmt.Sprintf("run %s %s (position %d)", short(d.RunID), d.State, d.Position)
		}
	case proto.EventRunStarted:
		return "run " + short(ev.RunID)
	case proto.EventRunCompleted:
		if d, err := client.DecodeData[proto.RunCompleted](ev); err == nil {
			s := fmt.Sprintf("run %s %s", short(d.RunID), d.Outcome)
			if d.Error != nil {
				s += fmt.Sprintf(": %s: %s", d.Error.Code, shorten(d.Error.Message))
			}
			return s
		}
	case proto.EventMessageCreated, proto.EventMessageUpdated:
		if m, err := client.DecodeData[proto.Message](ev); err == nil {
			return m.Role + " " + partsSummary(m.Parts)
		}
	case proto.EventToolStarted:
		if d, err := client.DecodeData[proto.ToolStarted](ev); err == nil {
			return d.Name + " " + shorten(string(d.Arguments))
		}
	case proto.EventToolFinished:
		if d, err := client.DecodeData[proto.ToolFinished](ev); err == nil {
			verb := "ok"
			if d.IsError {
				verb = "error"
			}
			return fmt.Sprintf("%s %s: %s", d.Name, verb, shorten(d.Content))
		}
	case proto.EventPermissionRequested:
		if d, err := client.DecodeData[proto.PermissionRequest](ev); err == nil {
			return fmt.Sprintf("%s (%s) %s [request %s]", d.ToolName, d.Kind, shorten(d.Summary), d.RequestID)
		}
	case proto.EventPermissionResolved:
		if d, err := client.DecodeData[proto.PermissionResolved](ev); err == nil {
			s := fmt.Sprintf("%s [request %s]", d.Result, d.RequestID)
			if d.ResolvedByName != "" {
				s = fmt.Sprintf("%s by %s [request %s]", d.Result, d.ResolvedByName, d.RequestID)
			}
			if d.Feedback != "" {
				s += ": " + shorten(d.Feedback)
			}
			return s
		}
	case proto.EventToolRequested:
		if d, err := client.DecodeData[proto.ToolCallRequest](ev); err == nil {
			return fmt.Sprintf("%s %s [request %s]", d.ToolName, shorten(string(d.Arguments)), d.RequestID)
		}
	case proto.EventToolResolved:
		if d, err := client.DecodeData[proto.ToolResolved](ev); err == nil {
			if d.IsError {
				return fmt.Sprintf("error [request %s]", d.RequestID)
			}
			return fmt.Sprintf("ok [request %s]", d.RequestID)
		}
	case proto.EventClientAttached, proto.EventClientDetached:
		if d, err := client.DecodeData[proto.ClientPresence](ev); err == nil {
			if d.Name != "" {
				return fmt.Sprintf("%s, client %s (%d attached)", d.Name, short(d.ClientID), d.Clients)
			}
			return fmt.Sprintf("client %s (%d attached)", short(d.ClientID), d.Clients)
		}
	case proto.EventWorkspaceClosing:
		if d, err := client.DecodeData[proto.WorkspaceClosing](ev); err == nil {
			return d.Reason
		}
	case proto.EventSessionIdle:
		return ""
	}
	return shorten(string(ev.Data))
}

// partsSummary lists a message's parts briefly: "text, tool_call write,
// finish tool_use".
func partsSummary(parts []proto.Part) string {
	var out []string
	for _, p := range parts {
		switch p.Type {
		case proto.PartText, proto.PartReasoning:
			out = append(out, fmt.Sprintf("%s %q", p.Type, shorten(p.Text)))
		case proto.PartToolCall:
			out = append(out, "tool_call "+p.Name)
		case proto.PartToolResult:
			out = append(out, "tool_result "+p.Name)
		case proto.PartAttachment:
			out = append(out, "attachment "+p.DisplayName)
		case proto.PartFinish:
			out = append(out, "finish "+p.Reason)
		default:
			out = append(out, p.Type)
		}
	}
	if len(out) == 0 {
		return "(empty)"
	}
	return strings.Join(out, ", ")
}
