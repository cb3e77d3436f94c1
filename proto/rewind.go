package proto

// Forks, exports, checkpoints and rewinds (contract section 11).

// Error codes of section 11.
const (
	CodeMessageNotFound    = "message_not_found"
	CodeCheckpointNotFound = "checkpoint_not_found"
	CodeSessionBusy        = "session_busy"
	CodeRewindConflict     = "rewind_conflict"
)

// EventSessionRewound announces a rewind (kept).
const EventSessionRewound = "session.rewound"

// ExportFormat names the version of an export document.
const ExportFormat = "tandem.session.v1"

// ForkRequest is the body of POST .../sessions/{sid}/fork.
type ForkRequest struct {
	ThroughMessageID string `json:"through_message_id,omitempty"`
	Title            string `json:"title,omitempty"`
}

// ForkedFrom says which session, up to which message, a fork copied.
type ForkedFrom struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
}

// ImportedFrom names the session an import's document was exported from.
type ImportedFrom struct {
	SessionID string `json:"session_id"`
}

// ExportSettings are the settings an export carries.
type ExportSettings struct {
	Model           string         `json:"model"`
	ReasoningEffort string         `json:"reasoning_effort"`
	SystemMessage   *SystemMessage `json:"system_message,omitempty"`
	AvailableTools  []string       `json:"available_tools,omitempty"`
	ExcludedTools   []string       `json:"excluded_tools,omitempty"`
	PermissionMode  string         `json:"permission_mode"`
	Compaction      *Compaction    `json:"compaction,omitempty"`
	// SandboxOptions are the session's sandbox settings; an import by
	// anyone but an owner that would widen them gets the defaults.
	SandboxOptions
}

// Export is the document of GET .../export and POST .../sessions/import.
type Export struct {
	Format   string         `json:"format"`
	Session  Session        `json:"session"`
	Settings ExportSettings `json:"settings"`
	Messages []Message      `json:"messages"`
}

// Checkpoint is a record of a workspace's files before a run changed them.
type Checkpoint struct {
	ID        string `json:"id"`
	RunID     string `json:"run_id"`
	MessageID string `json:"message_id"`
	CreatedAt Time   `json:"created_at"`
	// Missing marks a checkpoint the server could not save (a full data
	// disk): its run changed files, and there is no way back to before it.
	Missing bool `json:"missing,omitempty"`
}

// CheckpointList is the body of GET .../checkpoints.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

// File changes.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
)

// FileChange is a file that differs between a checkpoint and now.
type FileChange struct {
	Path   string `json:"path"`
	Change string `json:"change"`
}

// CheckpointDiff is the body of GET .../checkpoints/{cid}/diff.
type CheckpointDiff struct {
	Files []FileChange `json:"files"`
	Diff  string       `json:"diff"`
	// Kept are files there now that the checkpoint did not look at
	// (ignored then): a rewind to it leaves them as they are.
	Kept []string `json:"kept,omitempty"`
}

// RewindRequest is the body of POST .../rewind; Files and History default
// to true.
type RewindRequest struct {
	CheckpointID string `json:"checkpoint_id"`
	Files        *bool  `json:"files,omitempty"`
	History      *bool  `json:"history,omitempty"`
	Force        bool   `json:"force,omitempty"`
}

// RewindResult is the body of a rewind's 200.
type RewindResult struct {
	Files           []FileChange `json:"files"`
	RemovedMessages int          `json:"removed_messages"`
	// Kept are files there now that the checkpoint did not look at
	// (ignored then): whether they were there then is unknown, so the
	// rewind left them as they are.
	Kept []string `json:"kept,omitempty"`
}

// SessionRewound is the data of session.rewound.
type SessionRewound struct {
	CheckpointID    string       `json:"checkpoint_id"`
	Files           []FileChange `json:"files"`
	RemovedMessages int          `json:"removed_messages"`
}
