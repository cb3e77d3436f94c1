package client_test

import (
	"context"
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
