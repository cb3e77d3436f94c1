package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/tandem-dev/tandem/proto"
)

// ForkSession makes a new session of the workspace from the session's
// history up to and including req.ThroughMessageID (all of it when
// empty), with the source's settings.
func (c *Client) ForkSession(ctx context.Context, workspaceID, sessionID string, req proto.ForkRequest) (proto.Session, error) {
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", sessionID, "fork"), in: req, out: &out, auth: true})
	return out, err
}

// ExportSession returns the session as a tandem.session.v1 document.
func (c *Client) ExportSession(ctx context.Context, workspaceID, sessionID string) (proto.Export, error) {
	var out proto.Export
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "export"), out: &out, auth: true})
	return out, err
}

// ImportSession makes a new session of the workspace from an export
// document.
func (c *Client) ImportSession(ctx context.Context, workspaceID string, doc proto.Export) (proto.Session, error) {
	var out proto.Session
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", "import"), in: doc, out: &out, auth: true})
	return out, err
}

// Checkpoints lists the session's checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context, workspaceID, sessionID string) ([]proto.Checkpoint, error) {
	var out proto.CheckpointList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "checkpoints"), out: &out, auth: true})
	return out.Checkpoints, err
}

// CheckpointDiff is what a rewind to the checkpoint would undo.
func (c *Client) CheckpointDiff(ctx context.Context, workspaceID, sessionID, checkpointID string) (proto.CheckpointDiff, error) {
	var out proto.CheckpointDiff
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "checkpoints", checkpointID, "diff"), out: &out, auth: true})
	return out, err
}

// Rewind takes the session back to a checkpoint: its files, its history,
// or both (nil Files and History mean true).
func (c *Client) Rewind(ctx context.Context, workspaceID, sessionID string, req proto.RewindRequest) (proto.RewindResult, error) {
	var out proto.RewindResult
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("workspaces", workspaceID, "sessions", sessionID, "rewind"), in: req, out: &out, auth: true})
	return out, err
}

// AllMessages is Messages with the messages rewinds took out of the
// history, marked Rewound.
func (c *Client) AllMessages(ctx context.Context, workspaceID, sessionID string) ([]proto.Message, error) {
	var out proto.MessageList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("workspaces", workspaceID, "sessions", sessionID, "messages"),
		query: url.Values{"include_rewound": {"true"}}, out: &out, auth: true})
	return out.Messages, err
}
