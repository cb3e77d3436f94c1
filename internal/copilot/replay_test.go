package copilot

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aymanbagabas/go-udiff"
	"go.yaml.in/yaml/v3"

	"github.com/tandem-dev/tandem/internal/agent"
	"github.com/tandem-dev/tandem/internal/provider"
	"github.com/tandem-dev/tandem/internal/provider/openai"
	"github.com/tandem-dev/tandem/internal/toolset"
	"github.com/tandem-dev/tandem/internal/workspace"
)

// snapshotRoot holds the recorded model traffic of the vendored Copilot SDK
// suite (e2e/copilotsdk/UPSTREAM.md): conversations between the real
// Copilot CLI and the model, with the tool results as the model read them.
const snapshotRoot = "../../e2e/copilotsdk/test/snapshots"

// snapshotSuites are the test files whose snapshots the suite replays.
var snapshotSuites = []string{"multi_client", "session", "pending_work_resume"}

// clientTools are the apps' own tools in the recordings: the SDK client
// runs them and words their results, Tandem passes them on.
var clientTools = map[string]bool{
	"city_lookup": true, "currency_lookup": true, "ephemeral_tool": true, "get_secret_number": true,
	"magic_number": true, "pending_lookup_a": true, "pending_lookup_b": true,
	"resume_external_tool": true, "resume_permission_tool": true, "stable_tool": true,
}

// notReplayed are the recorded calls of Tandem's (or the CLI's) tools that
// this test cannot replay, by snapshot and call id, with why.
var notReplayed = map[string]string{
	"multi_client/one_client_rejects_permission_and_both_see_the_result.yaml#toolcall_0":         "no result recorded: a person denied the view beside it and the CLI ended the turn before sending results",
	"multi_client/one_client_rejects_permission_and_both_see_the_result.yaml#toolcall_1":         "no result recorded: a person denied it and the CLI ended the turn before sending results",
	"session/sendandwait_throws_operationcanceledexception_when_token_cancelled.yaml#toolcall_0": "no result recorded: the app cancelled while the shell call beside it ran",
	"session/sendandwait_throws_operationcanceledexception_when_token_cancelled.yaml#toolcall_1": "no result recorded: the app cancelled while it ran",
}

// interruptedCalls are the recorded calls an app's abort met while they
// ran; the replay cancels them as the abort does.
var interruptedCalls = map[string]bool{
	"session/should_abort_a_session.yaml#toolcall_1": true,
}

// workspaceFiles are the files the recorded conversations read, as the
// suite's tests (e2e/copilotsdk/go/internal/e2e/session_e2e_test.go)
// write them before the model asks.
var workspaceFiles = map[string]map[string][]byte{
	"session/should_send_with_file_attachment.yaml": {
		"attached-file.txt": []byte("FILE_ATTACHMENT_SENTINEL"),
	},
	"session/should_send_with_directory_attachment.yaml": {
		"attached-directory/readme.txt": []byte("DIRECTORY_ATTACHMENT_SENTINEL"),
	},
	"session/should_accept_blob_attachments.yaml": {
		"test-pixel.png": mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="),
	},
}

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// snapshot is the part of a recording the replay reads.
type snapshot struct {
	Conversations []struct {
		Messages []snapshotMessage `yaml:"messages"`
	} `yaml:"conversations"`
}

type snapshotMessage struct {
	Role       string `yaml:"role"`
	Content    string `yaml:"content"`
	ToolCallID string `yaml:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `yaml:"id"`
		Function struct {
			Name      string `yaml:"name"`
			Arguments string `yaml:"arguments"`
		} `yaml:"function"`
	} `yaml:"tool_calls"`
}

// recordedCall is one tool call of a recording and what the model read of
// it: its result, and the user message that followed the results (where
// the CLI shows the model an image a view looked at).
type recordedCall struct {
	file, id, name, args string
	result               *string
	after                *string
}

func (c recordedCall) key() string { return c.file + "#" + c.id }

// recordedCalls reads every tool call of the suites' snapshots, each once
// (later conversations repeat the earlier ones).
func recordedCalls(t *testing.T) []*recordedCall {
	t.Helper()
	var out []*recordedCall
	for _, suite := range snapshotSuites {
		files, err := filepath.Glob(filepath.Join(snapshotRoot, suite, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no snapshots in %s: %v", filepath.Join(snapshotRoot, suite), err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var s snapshot
			if err := yaml.Unmarshal(raw, &s); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			name := suite + "/" + filepath.Base(f)
			calls := map[string]*recordedCall{}
			for _, conv := range s.Conversations {
				for i, m := range conv.Messages {
					for _, tc := range m.ToolCalls {
						if calls[tc.ID] == nil {
							c := &recordedCall{file: name, id: tc.ID, name: tc.Function.Name, args: tc.Function.Arguments}
							calls[tc.ID] = c
							out = append(out, c)
						}
					}
					c := calls[m.ToolCallID]
					if m.Role != "tool" || c == nil || c.result != nil {
						continue
					}
					content := m.Content
					c.result = &content
					j := i + 1
					for j < len(conv.Messages) && conv.Messages[j].Role == "tool" {
						j++
					}
					if j < len(conv.Messages) && conv.Messages[j].Role == "user" {
						after := conv.Messages[j].Content
						c.after = &after
					}
				}
			}
		}
	}
	return out
}

// modelRequests is an upstream that records the requests the gateway
// sends the model and answers each with a short final message.
type modelRequests struct {
	mu   sync.Mutex
	last []byte
}

func (m *modelRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.last = body
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"r","model":"claude-sonnet-4.5","created":0,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
}

// readMessage is a message of a model request as the model reads it.
type readMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// text renders a message's content as the recordings store it: text parts
// one per line, an image as "[image]".
func (m readMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var lines []string
	for _, p := range parts {
		if p.Type == "text" {
			lines = append(lines, p.Text)
		} else {
			lines = append(lines, "["+strings.TrimSuffix(p.Type, "_url")+"]")
		}
	}
	return strings.Join(lines, "\n")
}

// availableTools is the list of its own tools the CLI adds to an
// unknown-tool error; the suite's replaying proxy drops it before
// matching, as the list is the CLI's tool set, not Tandem's.
var availableTools = regexp.MustCompile(`(Tool '[^']+' does not exist\.) Available tools that can be called are [^.]*\.`)

// Every recorded call of a tool Tandem implements, replayed through
// Tandem's dispatch (the bridge's mapping of the CLI's tool names, the
// tool set, the tool), Tandem's model provider and the bridge's gateway,
// reaches the model worded as the CLI's recorded result: the same call
// name and arguments, the same result text, the same image message.
func TestRecordedToolResultsReadAsTheCLIs(t *testing.T) {
	calls := recordedCalls(t)
	up := &modelRequests{}
	g := testGateway(t, up.ServeHTTP)
	p, err := openai.New(provider.Config{Type: provider.TypeOpenAI, BaseURL: g.BaseURL("replay"), APIKey: g.Key()})
	if err != nil {
		t.Fatal(err)
	}
	set := toolset.New(nil)

	replayed, listed, client := 0, 0, 0
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.key()] = true
		if clientTools[c.name] {
			client++
			continue
		}
		if why, ok := notReplayed[c.key()]; ok {
			t.Logf("not replayed: %s (%s): %s", c.key(), c.name, why)
			listed++
			continue
		}
		if c.result == nil {
			t.Errorf("%s (%s) has no recorded result and is not listed in notReplayed", c.key(), c.name)
			continue
		}
		t.Run(strings.TrimSuffix(c.key(), ".yaml#"+c.id)+"/"+c.id, func(t *testing.T) {
			replay(t, c, p, up, set)
		})
		replayed++
	}
	for k := range notReplayed {
		if !seen[k] {
			t.Errorf("notReplayed names %s, which no snapshot records", k)
		}
	}
	for k := range interruptedCalls {
		if !seen[k] {
			t.Errorf("interruptedCalls names %s, which no snapshot records", k)
		}
	}
	t.Logf("%d recorded calls replayed, %d listed as not replayable, %d of the apps' own tools", replayed, listed, client)
	if replayed == 0 {
		t.Fatal("no recorded call was replayed")
	}
}

// replay runs one recorded call in a fresh workspace and compares what the
// model reads with the recording.
func replay(t *testing.T, c *recordedCall, p provider.Provider, up *modelRequests, set *toolset.Set) {
	dir := t.TempDir()
	for rel, data := range workspaceFiles[c.file] {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The recordings name the work dir ${workdir} and the shell tool
	// ${shell} (bash, where this runs).
	args := strings.ReplaceAll(c.args, "${workdir}", filepath.ToSlash(dir))
	name := strings.ReplaceAll(c.name, "${shell}", "bash")

	// The gateway hands Tandem the model's call under Tandem's name.
	tname, targs := toTandem(name, args)
	call := provider.ToolCall{ID: c.id, Name: tname, Arguments: json.RawMessage(targs)}
	run := &agent.Run{ID: "run-" + c.id, SessionID: "replay", PermissionMode: "allow_all", Workspace: &workspace.Workspace{ID: "w", Path: dir}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if interruptedCalls[c.key()] {
		// The app aborts while the call runs; whenever the abort meets
		// it, the model must read the same interruption.
		abort, stop := context.WithCancel(ctx)
		defer stop()
		timer := time.AfterFunc(200*time.Millisecond, stop)
		defer timer.Stop()
		ctx = abort
	}
	res := set.Call(ctx, run, call)
	res.Content = agent.CutToolResult(res.Content) // as the run records it

	req := provider.Request{Model: "claude-sonnet-4.5", Messages: []provider.Message{
		{Role: provider.RoleUser, Text: "replay"},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{call}},
		{Role: provider.RoleTool, ToolCallID: c.id, ToolName: tname, Text: res.Content, IsError: res.IsError},
	}}
	if _, err := p.Stream(context.Background(), req, func(provider.Delta) {}); err != nil {
		t.Fatalf("model request through the gateway: %v", err)
	}
	up.mu.Lock()
	body := up.last
	up.mu.Unlock()
	var sent struct {
		Messages []readMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatalf("the gateway's request: %v", err)
	}
	norm := func(s string) string {
		s = strings.ReplaceAll(s, filepath.ToSlash(dir), "${workdir}")
		return strings.ReplaceAll(s, dir, "${workdir}")
	}

	var callMsg, resultMsg, afterMsg *readMessage
	for i := range sent.Messages {
		m := &sent.Messages[i]
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) == 1 && callMsg == nil:
			callMsg = m
		case m.Role == "tool" && m.ToolCallID == c.id:
			resultMsg = m
		case m.Role == "user" && resultMsg != nil && afterMsg == nil:
			afterMsg = m
		}
	}
	if callMsg == nil || resultMsg == nil {
		t.Fatalf("the model request has no call %s and its result: %s", c.id, body)
	}

	// The call, as the model reads it back.
	gotName := strings.ReplaceAll(callMsg.ToolCalls[0].Function.Name, "bash", "${shell}")
	if gotName != c.name {
		t.Errorf("the model reads its call as %q, the recording as %q", gotName, c.name)
	}
	var gotArgs, wantArgs any
	_ = json.Unmarshal([]byte(norm(callMsg.ToolCalls[0].Function.Arguments)), &gotArgs)
	_ = json.Unmarshal([]byte(c.args), &wantArgs)
	if !reflect.DeepEqual(gotArgs, wantArgs) {
		t.Errorf("the model reads its call's arguments as %s, the recording as %s", norm(callMsg.ToolCalls[0].Function.Arguments), c.args)
	}

	// The result.
	want := availableTools.ReplaceAllString(*c.result, "$1")
	if got := norm(resultMsg.text()); got != want {
		t.Errorf("the model reads a result the CLI words otherwise (Tandem: %q):\n%s", res.Content, udiff.Unified("recorded", "tandem", want+"\n", got+"\n"))
	}

	// What follows the results: an image a view looked at.
	var gotAfter string
	if afterMsg != nil {
		gotAfter = norm(afterMsg.text())
	}
	want = ""
	if c.after != nil {
		// The message after the results shows the images that views
		// looked at: this call's, when it names its path.
		first, _, _ := strings.Cut(*c.after, "\n")
		if p, ok := strings.CutPrefix(first, "Image file at path "); ok && strings.Contains(c.args, `"`+p+`"`) {
			want = *c.after
		}
	}
	if want != "" || afterMsg != nil {
		if gotAfter != want {
			t.Errorf("after the results the model reads another message:\n%s", udiff.Unified("recorded", "tandem", want+"\n", gotAfter+"\n"))
		}
	}
}
