package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"time"

	"github.com/tandem-dev/tandem/client"
	"github.com/tandem-dev/tandem/internal/server"
	"github.com/tandem-dev/tandem/proto"
)

// Example attaches to a workspace, prompts the agent and prints its answer as
// it streams in. The echo model answers "echo: " and the prompt.
func Example() {
	baseURL, token, projectDir, stop := startTandem()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := client.New(baseURL, token)
	defer c.CloseIdleConnections()
	ws, _, err := c.CreateWorkspace(ctx, projectDir)
	if err != nil {
		log.Fatal(err)
	}
	// Open the stream before prompting, so no event of the run goes by unseen.
	stream, err := c.Events(ctx, ws.ID, client.EventsOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()

	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Title: "demo"})
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "hello"})
	if err != nil {
		log.Fatal(err)
	}
	done, err := client.WaitRunFunc(ctx, stream, run.RunID, func(ev proto.Event) {
		if ev.Type == proto.EventMessageDelta {
			d, _ := client.DecodeData[proto.MessageDelta](ev)
			fmt.Print(d.Text)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	fmt.Println("outcome:", done.Outcome)
	// Output:
	// echo: hello
	// outcome: end_turn
}

// Example_answeringTheAgent answers what the agent asks while its runs go on:
// a permission before the built-in write tool runs, and a call of a tool that
// this client offers in the session. Any attached client may answer; the
// first answer wins.
func Example_answeringTheAgent() {
	baseURL, token, projectDir, stop := startTandem()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := client.New(baseURL, token)
	defer c.CloseIdleConnections()
	ws, _, err := c.CreateWorkspace(ctx, projectDir)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := c.Events(ctx, ws.ID, client.EventsOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{
		Tools: []proto.ToolSpec{{
			Name:           "lookup",
			Description:    "Looks a word up.",
			Parameters:     json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
			SkipPermission: true, // the client's own tool: no need to ask
		}},
	})
	if err != nil {
		log.Fatal(err)
	}

	// answer handles the requests of any run; a TUI would ask its user.
	answer := func(ev proto.Event) {
		switch ev.Type {
		case proto.EventPermissionRequested:
			pr, _ := client.DecodeData[proto.PermissionRequest](ev)
			fmt.Printf("permission asked: %s (%s)\n", pr.ToolName, pr.Kind)
			_, err := c.AnswerPermission(ctx, ws.ID, pr.RequestID, proto.PermissionAnswer{Decision: proto.DecisionApproveOnce})
			if err != nil {
				log.Print(err)
			}
		case proto.EventToolRequested:
			tr, _ := client.DecodeData[proto.ToolCallRequest](ev)
			fmt.Printf("tool asked: %s %s\n", tr.ToolName, tr.Arguments)
			_, err := c.AnswerToolCall(ctx, ws.ID, tr.RequestID, client.ToolResult("a greeting"))
			if err != nil {
				log.Print(err)
			}
		case proto.EventMessageUpdated:
			// An assistant message is complete once it ends in a finish part.
			m, _ := client.DecodeData[proto.Message](ev)
			if m.Role != proto.RoleAssistant || len(m.Parts) == 0 || m.Parts[len(m.Parts)-1].Type != proto.PartFinish {
				return
			}
			for _, p := range m.Parts {
				if p.Type == proto.PartText {
					fmt.Println("agent:", p.Text)
				}
			}
		}
	}
	for _, prompt := range []string{
		`/tool write {"path":"hello.txt","content":"hi"}`,
		`/tool lookup {"q":"hello"}`,
	} {
		run, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: prompt})
		if err != nil {
			log.Fatal(err)
		}
		done, err := client.WaitRunFunc(ctx, stream, run.RunID, answer)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("outcome:", done.Outcome)
	}
	// Output:
	// agent: calling tool write
	// permission asked: write (write)
	// agent: tool write returned: Created hello.txt (2 bytes).
	// outcome: end_turn
	// agent: calling tool lookup
	// tool asked: lookup {"q":"hello"}
	// agent: tool lookup returned: a greeting
	// outcome: end_turn
}

// startTandem runs a Tandem server in-process for the example; a real program
// would talk to `tandem serve` instead.
func startTandem() (baseURL, token, projectDir string, stop func()) {
	dataDir, err := os.MkdirTemp("", "tandem-example-data")
	if err != nil {
		log.Fatal(err)
	}
	projectDir, err = os.MkdirTemp("", "tandem-example-project")
	if err != nil {
		log.Fatal(err)
	}
	token = "example-token"
	srv, err := server.New(context.Background(), server.Config{DataDir: dataDir, Token: token})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	return ts.URL, token, projectDir, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.Close()
		_ = os.RemoveAll(dataDir)
		_ = os.RemoveAll(projectDir)
	}
}
