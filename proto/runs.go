package proto

import "encoding/json"

// Run states in a prompt's answer and in run.accepted.
const (
	RunRunning = "running"
	RunQueued  = "queued"
	// RunSteered: the prompt joined the session's active run (delivery
	// steer); the answer's run_id is that run's.
	RunSteered = "steered"
	// RunEnded: in the answer to a prompt retried with the
	// idempotency key of one accepted before, that run has ended.
	RunEnded = "completed"
)

// Deliveries of a prompt (PromptRequest.Delivery).
const (
	// DeliveryQueue queues the prompt as a run of its own (the default).
	DeliveryQueue = "queue"
	// DeliverySteer joins the session's active run: the prompt enters its
	// history before its next model request. With no active run it is
	// DeliveryQueue.
	DeliverySteer = "steer"
)

// Run outcomes of run.completed.
const (
	OutcomeEndTurn     = "end_turn"
	OutcomeCanceled    = "canceled"
	OutcomeError       = "error"
	OutcomeInterrupted = "interrupted"
)

// PromptRequest is the body of POST /v1/workspaces/{id}/agent.
type PromptRequest struct {
	SessionID   string       `json:"session_id"`
	Prompt      string       `json:"prompt"`
	Attachments []Attachment `json:"attachments,omitempty"`
	ClientID    string       `json:"client_id,omitempty"`
	// Delivery is DeliveryQueue ("" too) or DeliverySteer.
	Delivery string `json:"delivery,omitempty"`
	// IdempotencyKey (1 to MaxIdempotencyKey printable characters; ""
	// for none) makes the prompt safe to retry: a prompt whose key its
	// session accepted within the last 24 hours is answered with that
	// run's id and its state now, and starts nothing, on any node.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// MaxIdempotencyKey is the most characters a prompt's idempotency key
// may have.
const MaxIdempotencyKey = 128

// Attachment is a file of the workspace or an inline blob sent with a prompt.
type Attachment struct {
	Type        string     `json:"type"` // "file" or "blob"
	Path        string     `json:"path,omitempty"`
	DisplayName string     `json:"display_name,omitempty"`
	LineRange   *LineRange `json:"line_range,omitempty"`
	Data        string     `json:"data,omitempty"` // base64
	MimeType    string     `json:"mime_type,omitempty"`
}

// LineRange selects lines of a file attachment, from 1, inclusive.
type LineRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// PromptAccepted is the 202 answer to a prompt.
type PromptAccepted struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id"`
	State     string `json:"state"`
	Position  int    `json:"position"`
}

// CancelResponse is the answer to a cancel.
type CancelResponse struct {
	CanceledRuns []string `json:"canceled_runs"`
}

// AgentStatus is the body of GET .../agent/sessions/{sid}.
type AgentStatus struct {
	Busy        bool        `json:"busy"`
	ActiveRunID *string     `json:"active_run_id"`
	Queued      []QueuedRun `json:"queued"`
}

// QueuedRun is a prompt waiting for its session's active run.
type QueuedRun struct {
	RunID  string `json:"run_id"`
	Prompt string `json:"prompt"`
}

// RunAccepted is the data of run.accepted.
type RunAccepted struct {
	RunID    string `json:"run_id"`
	State    string `json:"state"`
	Position int    `json:"position"`
	ClientID string `json:"client_id"`
	// Prompt is the accepted prompt: kept with the event so that a run the
	// server loses to a crash can still be recorded with its user message.
	Prompt string `json:"prompt,omitempty"`
	// MessageID is, for a steered prompt (State RunSteered), the id its
	// user message gets in the run it joined.
	MessageID string `json:"message_id,omitempty"`
	// Compaction marks a compaction run (POST .../compact): it has no
	// prompt and no user message.
	Compaction bool `json:"compaction,omitempty"`
}

// RunStarted is the data of run.started.
type RunStarted struct {
	RunID string `json:"run_id"`
}

// RunCompleted is the data of run.completed.
type RunCompleted struct {
	RunID     string       `json:"run_id"`
	Outcome   string       `json:"outcome"`
	Error     *ErrorDetail `json:"error,omitempty"`
	MessageID string       `json:"message_id"`
	// Usage is what the run's model requests consumed, summed.
	Usage *Usage `json:"usage,omitempty"`
}

// Error codes of run.completed that are not a model's.
const (
	// CodeCompactionFailed: the conversation could not be compacted; the
	// history is unchanged.
	CodeCompactionFailed = "compaction_failed"
)

// MessageDelta is the data of message.delta.
type MessageDelta struct {
	MessageID string `json:"message_id"`
	PartIndex int    `json:"part_index"`
	Kind      string `json:"kind"` // "text" or "reasoning"
	Text      string `json:"text"`
}

// ToolStarted is the data of tool.started.
type ToolStarted struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
}

// ToolFinished is the data of tool.finished.
type ToolFinished struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	IsError    bool   `json:"is_error"`
	Content    string `json:"content"`
	// Permission is set when a permission rule decided the call without
	// asking: ResultApprovedByRule (it ran) or ResultDeniedByRule (it did
	// not, and Content is the denial the model read).
	Permission string `json:"permission,omitempty"`
	// Sandbox is the sandbox setting a bash call ran under (section 12).
	Sandbox string `json:"sandbox,omitempty"`
}
