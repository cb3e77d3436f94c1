package proto

// Constants of the contract that the other files of this package do not
// name yet: the enumerated values of request fields.

// Permission modes of a session (CreateSessionRequest.PermissionMode).
const (
	// PermissionModeAsk asks the clients before a tool that needs a
	// permission runs; it is the default.
	PermissionModeAsk = "ask"
	// PermissionModeAllowAll approves every permission without asking.
	PermissionModeAllowAll = "allow_all"
	// PermissionModeDenyAll denies every permission without asking
	// (result denied_by_mode).
	PermissionModeDenyAll = "deny_all"
)

// Reasoning efforts of a session (CreateSessionRequest.ReasoningEffort,
// SetModelRequest.ReasoningEffort).
const (
	ReasoningEffortLow    = "low"
	ReasoningEffortMedium = "medium"
	ReasoningEffortHigh   = "high"
	ReasoningEffortXHigh  = "xhigh"
)

// Log levels of LogRequest and session.log.
const (
	LogLevelInfo    = "info"
	LogLevelWarning = "warning"
	LogLevelError   = "error"
)

// Attachment types (Attachment.Type), also the kind of an attachment part.
const (
	AttachmentFile = "file"
	AttachmentBlob = "blob"
)

// Modes of a SystemMessage.
const (
	SystemMessageAppend    = "append"
	SystemMessageReplace   = "replace"
	SystemMessageCustomize = "customize"
)

// Actions of a SectionOverride.
const (
	SectionReplace = "replace"
	SectionRemove  = "remove"
	SectionAppend  = "append"
	SectionPrepend = "prepend"
)

// Provider types of a session's Provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAzure     = "azure"
	ProviderAnthropic = "anthropic"
)
