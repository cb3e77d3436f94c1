package client

import "github.com/tandem-dev/tandem/proto"

// ToolResult is the answer of a client tool call that succeeded with content,
// for AnswerToolCall. proto.ToolCallAnswer takes pointers because an empty
// result ("") is a valid answer that must still be sent.
func ToolResult(content string) proto.ToolCallAnswer {
	return proto.ToolCallAnswer{Result: &content}
}

// ToolError is the answer of a client tool call that failed, for
// AnswerToolCall; the model sees message as the tool's error.
func ToolError(message string) proto.ToolCallAnswer {
	return proto.ToolCallAnswer{Error: &message}
}

// Effort is a reasoning effort for proto.SetModelRequest, whose
// ReasoningEffort is a pointer because leaving it nil keeps the session's
// current effort: Effort(proto.ReasoningEffortHigh).
func Effort(effort string) *string { return &effort }
