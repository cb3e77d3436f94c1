package proto

import (
	"encoding/json"
	"fmt"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one entry of a session's history.
type Message struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	RunID     string `json:"run_id,omitempty"`
	Role      string `json:"role"`
	Parts     []Part `json:"parts"`
	Model     string `json:"model,omitempty"`
	// ClientID is, on a user message, the client that sent the prompt.
	ClientID  string `json:"client_id,omitempty"`
	CreatedAt Time   `json:"created_at"`
	UpdatedAt Time   `json:"updated_at"`
	// Usage is, on an assistant message, what its model request consumed
	// (the sum over its retries), once the request is done. A summary
	// message's is what its summary requests consumed.
	Usage *Usage `json:"usage,omitempty"`
	// Rewound marks a message a rewind took out of the history; only
	// GET .../messages?include_rewound=true lists them.
	Rewound bool `json:"rewound,omitempty"`
	// Author is, on a user message, the person who sent the prompt
	// (section 9).
	Author *Author `json:"author,omitempty"`
}

// Part types.
const (
	PartText       = "text"
	PartReasoning  = "reasoning"
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
	PartAttachment = "attachment"
	PartFinish     = "finish"
	// PartSummary is a compaction's summary: the only part of its
	// assistant message. Model requests read it in place of the messages
	// up to ThroughMessageID.
	PartSummary = "summary"
)

// Finish reasons; the outcomes of run.completed are the subset end_turn,
// canceled, error and interrupted.
const (
	FinishEndTurn     = "end_turn"
	FinishToolUse     = "tool_use"
	FinishMaxTokens   = "max_tokens"
	FinishCanceled    = "canceled"
	FinishError       = "error"
	FinishInterrupted = "interrupted"
)

// Part is one piece of a message. Which fields are meaningful depends on Type;
// MarshalJSON writes exactly the fields of that type.
type Part struct {
	Type string

	// text, reasoning
	Text string

	// tool_call: ID, Name, Arguments (a JSON object)
	ID        string
	Name      string
	Arguments json.RawMessage

	// tool_result: ToolCallID, Name, Content, IsError
	ToolCallID string
	Content    string
	IsError    bool

	// attachment
	Kind        string
	Path        string
	MimeType    string
	DisplayName string
	Size        int64

	// finish: Reason, Message
	Reason  string
	Message string

	// summary: Text, ThroughMessageID
	ThroughMessageID string
}

type partText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type partToolCall struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type partToolResult struct {
	Type       string `json:"type"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	Content    string `json:"content"`
	IsError    bool   `json:"is_error"`
}

type partAttachment struct {
	Type        string `json:"type"`
	Kind        string `json:"kind"`
	Path        string `json:"path,omitempty"`
	MimeType    string `json:"mime_type"`
	DisplayName string `json:"display_name"`
	Size        int64  `json:"size"`
}

type partSummary struct {
	Type             string `json:"type"`
	Text             string `json:"text"`
	ThroughMessageID string `json:"through_message_id"`
}

type partFinish struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// MarshalJSON implements json.Marshaler.
func (p Part) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartText, PartReasoning:
		return json.Marshal(partText{p.Type, p.Text})
	case PartToolCall:
		args := p.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		return json.Marshal(partToolCall{p.Type, p.ID, p.Name, args})
	case PartToolResult:
		return json.Marshal(partToolResult{p.Type, p.ToolCallID, p.Name, p.Content, p.IsError})
	case PartAttachment:
		return json.Marshal(partAttachment{p.Type, p.Kind, p.Path, p.MimeType, p.DisplayName, p.Size})
	case PartFinish:
		return json.Marshal(partFinish{p.Type, p.Reason, p.Message})
	case PartSummary:
		return json.Marshal(partSummary{p.Type, p.Text, p.ThroughMessageID})
	}
	return nil, fmt.Errorf("marshal part: unknown type %q", p.Type)
}

// UnmarshalJSON implements json.Unmarshaler.
func (p *Part) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type        string          `json:"type"`
		Text        string          `json:"text"`
		ID          string          `json:"id"`
		Name        string          `json:"name"`
		Arguments   json.RawMessage `json:"arguments"`
		ToolCallID  string          `json:"tool_call_id"`
		Content     string          `json:"content"`
		IsError     bool            `json:"is_error"`
		Kind        string          `json:"kind"`
		Path        string          `json:"path"`
		MimeType    string          `json:"mime_type"`
		DisplayName string          `json:"display_name"`
		Size        int64           `json:"size"`
		Reason      string          `json:"reason"`
		Message     string          `json:"message"`
		Through     string          `json:"through_message_id"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*p = Part{
		Type: raw.Type, Text: raw.Text, ID: raw.ID, Name: raw.Name, Arguments: raw.Arguments,
		ToolCallID: raw.ToolCallID, Content: raw.Content, IsError: raw.IsError,
		Kind: raw.Kind, Path: raw.Path, MimeType: raw.MimeType, DisplayName: raw.DisplayName,
		Size: raw.Size, Reason: raw.Reason, Message: raw.Message, ThroughMessageID: raw.Through,
	}
	return nil
}
