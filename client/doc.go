// Package client is the Go SDK for Tandem's HTTP API: one method per route of
// the contract, typed errors, and an event stream that reconnects by itself
// without gaps or duplicates.
//
// A typical client attaches to a workspace, opens its event stream before
// prompting (so it cannot miss the run's first events), then prompts and waits:
//
//	c := client.New("http://127.0.0.1:7433", token)
//	ws, _, err := c.CreateWorkspace(ctx, "/path/to/project")
//	if err != nil { ... }
//	stream, err := c.Events(ctx, ws.ID, client.EventsOptions{})
//	if err != nil { ... }
//	defer stream.Close()
//	sess, err := c.CreateSession(ctx, ws.ID, proto.CreateSessionRequest{Title: "demo"})
//	if err != nil { ... }
//	run, err := c.Prompt(ctx, ws.ID, proto.PromptRequest{SessionID: sess.ID, Prompt: "hello"})
//	if err != nil { ... }
//	done, err := client.WaitRunFunc(ctx, stream, run.RunID, func(ev proto.Event) {
//		if ev.Type == proto.EventMessageDelta {
//			d, _ := client.DecodeData[proto.MessageDelta](ev)
//			fmt.Print(d.Text)
//		}
//	})
//	fmt.Println("\n" + done.Outcome)
//
// While a run goes on the agent may wait on the clients: a permission.requested
// event (decode it as proto.PermissionRequest) is answered with
// AnswerPermission, a tool.requested event (proto.ToolCallRequest) for a tool
// a client offered in CreateSession or Resume is answered with AnswerToolCall
// and ToolResult or ToolError. Any client may answer and the first answer
// wins. Pending and ListPermissions list what still waits, for a client that
// attaches late; Resume attaches a client to an existing session and says
// what waits on it.
//
// Steer sends a prompt into a session's running run (the model reads it at
// its next step; the run ends with one run.completed, which WaitRun on the
// returned run id follows); Compact summarizes a session's conversation in a
// run of its own; UpdateSession changes its settings. run.completed, each
// assistant message and the session carry the proto.Usage their model
// requests reported, with the cost when the model's prices are known.
//
// The request and answer bodies are package proto's types. Wherever the
// contract takes a client_id and the caller leaves it empty, the SDK sends
// the client's own (ClientID).
//
// Errors the server answers come back as *APIError; test them with IsCode
// rather than by status, because several conditions share a status (a 409 may
// be already_exists or workspace_not_open) and the code is what a caller acts on.
//
// The token is sent only in the Authorization header, never in a URL, so it
// cannot leak through error messages (net/http quotes URLs in its errors) or
// through the logger.
package client
