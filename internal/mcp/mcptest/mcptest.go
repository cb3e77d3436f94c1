// Package mcptest is a small MCP server for tests, written with the same
// SDK as Tandem's client: run as a child process over stdio (a test
// binary's TestMain calls Main, and the test starts os.Args[0] with EnvMode
// set) or served over HTTP (NewServer with the SDK's streamable handler).
//
// Its tools: echo {text}, fail {message} (an error result), sleep {ms} (until
// done or canceled; says "sleeping" and "sleep canceled"), die {}
// (Options.Die; a child process exits with status 3), add_tool {name} (a new
// echo-like tool: the server says its tool list changed), spawn {} (a
// grandchild process that ignores SIGTERM; returns its pid), env {name},
// cwd {}, pid {}, mixed {} (text and an image), big {bytes}.
package mcptest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvMode selects what Main runs in a child process:
//   - "serve": the server over stdin and stdout;
//   - "mute": read stdin and never answer (a handshake that never ends);
//   - "exit": write to stderr and exit with status 2 at once;
//   - "sleep": sleep until killed, ignoring SIGTERM (spawn's grandchild).
const EnvMode = "TANDEM_MCPTEST"

// Main runs the mode EnvMode names and exits; without it, it returns at once.
// Call it first in TestMain.
func Main() {
	mode := os.Getenv(EnvMode)
	if mode == "" {
		return
	}
	switch mode {
	case "serve":
		fmt.Fprintln(os.Stderr, "mcptest: serving on stdio")
		srv := NewServer(Options{Die: func() { os.Exit(3) }})
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "mcptest:", err)
		}
		os.Exit(0)
	case "mute":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "mcptest: exiting at once")
		os.Exit(2)
	case "sleep":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "mcptest: unknown mode", mode)
	os.Exit(1)
}

// Options tune NewServer.
type Options struct {
	// Die is what the die tool does; nil makes it an error result.
	Die func()
	// Say hears what the server says of its calls ("sleeping", "sleep
	// canceled"); nil writes it to stderr.
	Say func(string)
}

func (o Options) say(s string) {
	if o.Say != nil {
		o.Say(s)
		return
	}
	fmt.Fprintln(os.Stderr, s)
}

type echoArgs struct {
	Text string `json:"text"`
}

type failArgs struct {
	Message string `json:"message"`
}

type sleepArgs struct {
	MS int `json:"ms"`
}

type nameArgs struct {
	Name string `json:"name"`
}

type bigArgs struct {
	Bytes int `json:"bytes"`
}

type none struct{}

type readArgs struct {
	Path string `json:"path"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// NewServer returns the test server.
func NewServer(opts Options) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return text(a.Text), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Fail with the message."},
		func(_ context.Context, _ *sdk.CallToolRequest, a failArgs) (*sdk.CallToolResult, any, error) {
			r := text(a.Message)
			r.IsError = true
			return r, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "sleep", Description: "Sleep ms milliseconds, or until canceled."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a sleepArgs) (*sdk.CallToolResult, any, error) {
			opts.say("sleeping")
			t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text("slept"), nil, nil
			case <-ctx.Done():
				opts.say("sleep canceled")
				return nil, nil, ctx.Err()
			}
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "die", Description: "Die in the middle of the call."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			if opts.Die == nil {
				r := text("cannot die here")
				r.IsError = true
				return r, nil, nil
			}
			opts.Die()
			// A process is gone by now. Over HTTP, Die has cut the
			// connections and closed the listener: this answer reaches
			// nobody, and the caller must learn from the transport.
			return nil, nil, errors.New("died")
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "add_tool", Description: "Add an echo tool of this name."},
		func(_ context.Context, _ *sdk.CallToolRequest, a nameArgs) (*sdk.CallToolResult, any, error) {
			sdk.AddTool(srv, &sdk.Tool{Name: a.Name, Description: "Added echo."},
				func(_ context.Context, _ *sdk.CallToolRequest, e echoArgs) (*sdk.CallToolResult, any, error) {
					return text(a.Name + ": " + e.Text), nil, nil
				})
			return text("added " + a.Name), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "spawn", Description: "Start a grandchild that ignores SIGTERM; return its pid."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), EnvMode+"=sleep")
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			go func() { _ = cmd.Wait() }()
			return text(strconv.Itoa(cmd.Process.Pid)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "env", Description: "The value of an environment variable."},
		func(_ context.Context, _ *sdk.CallToolRequest, a nameArgs) (*sdk.CallToolResult, any, error) {
			return text(os.Getenv(a.Name)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "cwd", Description: "The working directory."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			wd, err := os.Getwd()
			return text(wd), nil, err
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "read", Description: "The content of a file, or why it cannot be read."},
		func(_ context.Context, _ *sdk.CallToolRequest, a readArgs) (*sdk.CallToolResult, any, error) {
			data, err := os.ReadFile(a.Path)
			if err != nil {
				return text("cannot read: " + err.Error()), nil, nil
			}
			return text(string(data)), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "mixed", Description: "Text and an image."},
		func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "first"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte("not really a png")},
				&sdk.TextContent{Text: "last"},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "big", Description: "A text of the given size."},
		func(_ context.Context, _ *sdk.CallToolRequest, a bigArgs) (*sdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", a.Bytes)), nil, nil
		})
	return srv
}
